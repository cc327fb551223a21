//! Returns a 16 MiB reason: the host must bound what it accepts.
use eagle_policy_sdk::*;
struct Huge;
impl Policy for Huge {
    fn metadata() -> Metadata {
        Metadata::new("huge-string", "0.1.0", "returns a huge reason").deciding()
    }
    fn decide(_: &Config, _: &Request) -> Decision {
        Decision::deny("x".repeat(16 << 20))
    }
}
export_policy!(Huge);
