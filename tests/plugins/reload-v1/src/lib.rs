//! Version 1 of a plugin that changes its mind: approves everything.
use eagle_policy_sdk::*;
struct V1;
impl Policy for V1 {
    fn metadata() -> Metadata {
        Metadata::new("reload-probe", "1.0.0", "approves everything")
            .deciding()
            .filtering()
    }
    fn decide(_: &Config, _: &Request) -> Decision {
        Decision::approve()
    }
    fn filter(_: &Config, _: &Task) -> FilterVerdict {
        FilterVerdict::Keep
    }
}
export_policy!(V1);
