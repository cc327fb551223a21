//! A small stable hash (FNV-1a) for etags and made-up commit ids: the same
//! input gives the same output on every run and every machine.

/// FNV-1a over `bytes`, starting from a seed mixed into the offset basis.
pub(crate) fn fnv(bytes: &[u8], seed: u64) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325_u64 ^ seed;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// 40 hex digits derived from `text`, shaped like a commit id.
pub(crate) fn hex40(text: &str) -> String {
    let parts: Vec<String> = (0..3)
        .map(|seed| format!("{:016x}", fnv(text.as_bytes(), seed)))
        .collect();
    parts.concat()[..40].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_and_shaped() {
        assert_eq!(hex40("a"), hex40("a"));
        assert_ne!(hex40("a"), hex40("b"));
        assert_eq!(hex40("a").len(), 40);
        assert_ne!(fnv(b"a", 0), fnv(b"a", 1));
    }
}
