//! Recurses without end, in wasm locals (not Rust's shadow stack in linear
//! memory): the engine's stack limit must stop it.
use eagle_policy_sdk::*;
struct Deep;
#[inline(never)]
#[allow(unconditional_recursion)]
fn descend(n: u64) -> u64 {
    descend(std::hint::black_box(n.wrapping_add(1))).wrapping_mul(3)
}
impl Policy for Deep {
    fn metadata() -> Metadata {
        Metadata::new("recursion", "0.1.0", "recurses without end").deciding()
    }
    fn decide(_: &Config, r: &Request) -> Decision {
        Decision::deny(format!("{}", descend(r.run_id)))
    }
}
export_policy!(Deep);
