//! Version 2 of a plugin that changes its mind: denies everything.
use eagle_policy_sdk::*;
struct V2;
impl Policy for V2 {
    fn metadata() -> Metadata {
        Metadata::new("reload-probe", "2.0.0", "denies everything")
            .deciding()
            .filtering()
    }
    fn decide(config: &Config, _: &Request) -> Decision {
        let why = config.str("why").unwrap_or("version 2 denies");
        Decision::deny(why)
    }
    fn filter(_: &Config, _: &Task) -> FilterVerdict {
        FilterVerdict::Skip("version 2 skips".into())
    }
}
export_policy!(V2);
