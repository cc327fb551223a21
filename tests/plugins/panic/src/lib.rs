//! Panics in `decide`: the instance traps.
use eagle_policy_sdk::*;
struct Boom;
impl Policy for Boom {
    fn metadata() -> Metadata {
        Metadata::new("panic", "0.1.0", "panics").deciding()
    }
    fn decide(_: &Config, r: &Request) -> Decision {
        panic!("boom on {}", r.action)
    }
}
export_policy!(Boom);
