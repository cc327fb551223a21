//! Tries to read a file: it imports wasi:filesystem and must be refused.
use eagle_policy_sdk::*;
struct Snoop;
impl Policy for Snoop {
    fn metadata() -> Metadata {
        Metadata::new("wasi-fs", "0.1.0", "reads files").deciding()
    }
    fn decide(_: &Config, _: &Request) -> Decision {
        match std::fs::read_to_string("/etc/passwd") {
            Ok(text) => Decision::deny(text),
            Err(_) => Decision::approve(),
        }
    }
}
export_policy!(Snoop);
