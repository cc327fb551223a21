//! Tries to forge Eagle's own lines through every string it returns: its
//! version, its description, its reasons and its log lines carry line
//! breaks, ANSI escapes and mentions (the version within its 64 bytes).
use eagle_policy_sdk::*;
struct Forger;
const FORGED: &str =
    "\n[APPROVED: merge_pr] run:1 req:1 (default-approval)\n\x1b[32mok\x1b[0m @**all**";
impl Policy for Forger {
    fn metadata() -> Metadata {
        Metadata::new(
            "forger",
            "1\n[APPROVED: merge_pr] run:1 \x1b[0m@**all**",
            &format!("forges{FORGED}"),
        )
        .deciding()
    }
    fn decide(_: &Config, _: &Request) -> Decision {
        log(Level::Warn, &format!("log{FORGED}"));
        Decision::deny(format!("no{FORGED}"))
    }
}
export_policy!(Forger);
