//! Addresses: which ones are public (anything else, a worker reaches only
//! through a host the allow list names exactly), and name resolution,
//! which happens here because a worker has no DNS of its own.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

/// Whether `ip` is an address of the public internet: not loopback,
/// private, link-local, shared (CGNAT), unspecified, multicast, broadcast,
/// reserved, documentation or benchmarking space, and not an IPv6 form of
/// one (mapped, compatible, NAT64, 6to4, Teredo). What is not public may be
/// Eagle itself, its database, the host's other services or the local
/// network, so a name resolving there is refused unless named exactly.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(ip) => is_public_v4(ip),
        IpAddr::V6(ip) => is_public_v6(ip),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0 // "this network"
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240) // reserved
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    let s = ip.segments();
    let embedded = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    if s[..6] == [0; 6] {
        // Unspecified, loopback and the deprecated IPv4-compatible form.
        return !ip.is_unspecified() && !ip.is_loopback() && is_public_v4(embedded(s[6], s[7]));
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        // NAT64: the IPv4 address it reaches.
        return is_public_v4(embedded(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        // 6to4: the IPv4 address of the relay's other end.
        return is_public_v4(embedded(s[1], s[2]));
    }
    !(ip.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00 // unique local
        || (s[0] & 0xffc0) == 0xfe80 // link-local
        || (s[0] & 0xffc0) == 0xfec0 // site-local (deprecated)
        || (s[0] == 0x2001 && s[1] == 0) // Teredo
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || (s[0] == 0x0100 && s[1..4] == [0, 0, 0]) // discard
        || (s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1)) // local-use NAT64
}

/// The addresses of `name`, resolved once: the proxy connects only to the
/// addresses it judged, never resolving again (a second answer could be
/// another address).
pub async fn resolve(name: &str, port: u16, timeout: Duration) -> Result<Vec<SocketAddr>, String> {
    match tokio::time::timeout(timeout, tokio::net::lookup_host((name, port))).await {
        Err(_) => Err(format!("resolving {name} took longer than {timeout:?}")),
        Ok(Err(error)) => Err(format!("cannot resolve {name}: {error}")),
        Ok(Ok(addrs)) => {
            let mut addrs: Vec<SocketAddr> = addrs.collect();
            addrs.dedup();
            if addrs.is_empty() {
                Err(format!("{name} has no address"))
            } else {
                Ok(addrs)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_and_not() {
        let cases = [
            ("1.1.1.1", true),
            ("93.184.216.34", true),
            ("100.63.255.255", true),
            ("100.128.0.1", true),
            ("172.32.0.1", true),
            ("2606:4700::1111", true),
            ("::ffff:1.1.1.1", true),
            ("64:ff9b::101:101", true),
            ("127.0.0.1", false),
            ("127.255.255.254", false),
            ("0.0.0.0", false),
            ("0.1.2.3", false),
            ("10.0.0.1", false),
            ("172.16.0.1", false),
            ("172.31.255.255", false),
            ("192.168.1.1", false),
            ("169.254.169.254", false),
            ("100.64.0.1", false),
            ("192.0.0.8", false),
            ("192.0.2.1", false),
            ("198.18.0.1", false),
            ("224.0.0.1", false),
            ("240.0.0.1", false),
            ("255.255.255.255", false),
            ("::", false),
            ("::1", false),
            ("::127.0.0.1", false),
            ("::ffff:127.0.0.1", false),
            ("::ffff:169.254.169.254", false),
            ("64:ff9b::a00:1", false),
            ("64:ff9b:1::1", false),
            ("2002:7f00:1::1", false),
            ("2001::1", false),
            ("2001:db8::1", false),
            ("fc00::1", false),
            ("fd12:3456::1", false),
            ("fe80::1", false),
            ("fec0::1", false),
            ("ff02::1", false),
            ("100::1", false),
        ];
        for (ip, public) in cases {
            assert_eq!(is_public(ip.parse().unwrap()), public, "{ip}");
        }
    }

    #[tokio::test]
    async fn localhost_resolves_to_loopback() {
        let addrs = resolve("localhost", 80, Duration::from_secs(5))
            .await
            .unwrap();
        assert!(addrs.iter().all(|a| !is_public(a.ip())), "{addrs:?}");
        assert!(
            resolve("no-such-host.invalid", 80, Duration::from_secs(5))
                .await
                .is_err()
        );
    }
}
