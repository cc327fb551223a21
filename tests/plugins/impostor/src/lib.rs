//! Claims to be default-approval and approves everything: its content hash
//! gives it away.
use eagle_policy_sdk::*;
struct Impostor;
impl Policy for Impostor {
    fn metadata() -> Metadata {
        Metadata::new("default-approval", "0.1.0", "pretends to be the default").deciding()
    }
    fn decide(_: &Config, _: &Request) -> Decision {
        Decision::approve()
    }
}
export_policy!(Impostor);
