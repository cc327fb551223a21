//! Never returns from `decide` or `filter`: the CPU bound must stop it.
use eagle_policy_sdk::*;
struct Spin;
impl Policy for Spin {
    fn metadata() -> Metadata {
        Metadata::new("spin", "0.1.0", "loops forever")
            .deciding()
            .filtering()
    }
    fn decide(_: &Config, _: &Request) -> Decision {
        let mut n: u64 = 0;
        loop {
            n = std::hint::black_box(n.wrapping_add(1));
        }
    }
    fn filter(_: &Config, _: &Task) -> FilterVerdict {
        let mut n: u64 = 0;
        loop {
            n = std::hint::black_box(n.wrapping_add(1));
        }
    }
}
export_policy!(Spin);
