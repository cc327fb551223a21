//! Allocates without end: the memory cap must stop it.
use eagle_policy_sdk::*;
struct Bomb;
impl Policy for Bomb {
    fn metadata() -> Metadata {
        Metadata::new("memory-bomb", "0.1.0", "allocates without end").deciding()
    }
    fn decide(_: &Config, _: &Request) -> Decision {
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        loop {
            hoard.push(vec![1u8; 1 << 20]);
            std::hint::black_box(&hoard);
        }
    }
}
export_policy!(Bomb);
