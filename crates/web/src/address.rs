//! Which IP addresses and host names `web_fetch` may reach: everything public, nothing
//! that lands on this machine, its networks or a cloud's metadata service.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is off limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forbidden {
    /// `0.0.0.0/8`, `::`: connecting to it reaches this machine.
    Unspecified,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// RFC 1918 networks and deprecated IPv6 site-local addresses.
    Private,
    /// `100.64.0.0/10`, carrier-grade NAT, also used by cloud-internal services.
    SharedAddressSpace,
    /// `169.254.0.0/16`, `fe80::/10`.
    LinkLocal,
    /// `fc00::/7`.
    UniqueLocal,
    /// A cloud provider's instance metadata service.
    Metadata,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// `255.255.255.255`.
    Broadcast,
    /// Ranges reserved for documentation examples.
    Documentation,
    /// Reserved, benchmarking, protocol-assignment and transition ranges that no public
    /// web server lives in.
    Reserved,
}

impl Forbidden {
    /// The phrase completing "… is".
    pub fn describe(self) -> &'static str {
        match self {
            Self::Unspecified => "an unspecified address",
            Self::Loopback => "a loopback address",
            Self::Private => "a private address",
            Self::SharedAddressSpace => "a shared (carrier-grade NAT) address",
            Self::LinkLocal => "a link-local address",
            Self::UniqueLocal => "a unique-local address",
            Self::Metadata => "a cloud metadata address",
            Self::Multicast => "a multicast address",
            Self::Broadcast => "a broadcast address",
            Self::Documentation => "a documentation address",
            Self::Reserved => "a reserved address",
        }
    }
}

impl fmt::Display for Forbidden {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.describe())
    }
}

/// The AWS, GCP, Azure, OpenStack and Oracle metadata address (also inside link-local).
const METADATA_V4: Ipv4Addr = Ipv4Addr::new(169, 254, 169, 254);
/// Alibaba Cloud's metadata address (also inside the shared address space).
const METADATA_ALIBABA_V4: Ipv4Addr = Ipv4Addr::new(100, 100, 100, 200);
/// The AWS metadata service over IPv6.
const METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254);

/// Host names that reach a metadata service through the platform's own DNS.
const METADATA_NAMES: [&str; 2] = ["metadata.google.internal", "metadata"];

/// Why `address` may not be fetched, or `None` when it is a public address.
pub fn classify(address: IpAddr) -> Option<Forbidden> {
    match address {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// IPv4 rules.
pub fn classify_v4(address: Ipv4Addr) -> Option<Forbidden> {
    let [a, b, c, _] = address.octets();
    if address == METADATA_V4 || address == METADATA_ALIBABA_V4 {
        return Some(Forbidden::Metadata);
    }
    let class = match (a, b, c) {
        (0, _, _) => Forbidden::Unspecified,
        (10, _, _) => Forbidden::Private,
        (100, 64..=127, _) => Forbidden::SharedAddressSpace,
        (127, _, _) => Forbidden::Loopback,
        (169, 254, _) => Forbidden::LinkLocal,
        (172, 16..=31, _) => Forbidden::Private,
        (192, 0, 0) => Forbidden::Reserved,
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => Forbidden::Documentation,
        (192, 168, _) => Forbidden::Private,
        (198, 18..=19, _) => Forbidden::Reserved,
        (224..=239, _, _) => Forbidden::Multicast,
        (255, 255, 255) if address == Ipv4Addr::BROADCAST => Forbidden::Broadcast,
        (240..=255, _, _) => Forbidden::Reserved,
        _ => return None,
    };
    Some(class)
}

/// IPv6 rules; forms that embed an IPv4 address (mapped, compatible, NAT64, 6to4) are
/// judged by the address they carry, since that is where the packets end up.
pub fn classify_v6(address: Ipv6Addr) -> Option<Forbidden> {
    if address == METADATA_V6 {
        return Some(Forbidden::Metadata);
    }
    if address.is_unspecified() {
        return Some(Forbidden::Unspecified);
    }
    if address.is_loopback() {
        return Some(Forbidden::Loopback);
    }
    let segments = address.segments();
    let octets = address.octets();
    let embedded =
        |offset: usize| Ipv4Addr::new(octets[offset], octets[offset + 1], octets[offset + 2], octets[offset + 3]);
    // ::ffff:a.b.c.d, IPv4-mapped.
    if segments[..6] == [0, 0, 0, 0, 0, 0xffff] {
        return classify_v4(embedded(12));
    }
    // ::a.b.c.d, the deprecated IPv4-compatible form: never a public route.
    if segments[..6] == [0; 6] {
        return Some(classify_v4(embedded(12)).unwrap_or(Forbidden::Reserved));
    }
    // 64:ff9b::/96, the well-known NAT64 prefix, translates to the embedded address.
    if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return classify_v4(embedded(12));
    }
    // 64:ff9b:1::/48, NAT64 prefixes for local use.
    if segments[..3] == [0x64, 0xff9b, 1] {
        return Some(Forbidden::Private);
    }
    // 2002::/16, 6to4: the embedded address follows the prefix.
    if segments[0] == 0x2002 {
        return classify_v4(embedded(2));
    }
    let class = match segments[0] {
        // 100::/64 discard-only.
        0x0100 if segments[1..4] == [0, 0, 0] => Forbidden::Reserved,
        // 2001::/32 Teredo tunnels hide the real endpoint.
        0x2001 if segments[1] == 0 => Forbidden::Reserved,
        0x2001 if segments[1] == 0x0db8 => Forbidden::Documentation,
        // 3fff::/20, documentation (RFC 9637).
        0x3fff if segments[1] < 0x1000 => Forbidden::Documentation,
        first if first & 0xfe00 == 0xfc00 => Forbidden::UniqueLocal,
        first if first & 0xffc0 == 0xfe80 => Forbidden::LinkLocal,
        first if first & 0xffc0 == 0xfec0 => Forbidden::Private,
        first if first & 0xff00 == 0xff00 => Forbidden::Multicast,
        _ => return None,
    };
    Some(class)
}

/// True for host names that name a metadata service whatever they resolve to.
pub fn is_metadata_name(host: &str) -> bool {
    let host = host.trim_end_matches('.');
    METADATA_NAMES.iter().any(|name| host.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> Option<Forbidden> {
        classify(text.parse().unwrap_or_else(|error| panic!("{text}: {error}")))
    }

    #[test]
    fn ipv4_ranges() {
        let cases = [
            ("0.0.0.0", Some(Forbidden::Unspecified)),
            ("0.1.2.3", Some(Forbidden::Unspecified)),
            ("10.0.0.5", Some(Forbidden::Private)),
            ("10.255.255.255", Some(Forbidden::Private)),
            ("100.63.255.255", None),
            ("100.64.0.1", Some(Forbidden::SharedAddressSpace)),
            ("100.127.255.255", Some(Forbidden::SharedAddressSpace)),
            ("100.128.0.0", None),
            ("100.100.100.200", Some(Forbidden::Metadata)),
            ("127.0.0.1", Some(Forbidden::Loopback)),
            ("127.0.0.2", Some(Forbidden::Loopback)),
            ("127.255.255.254", Some(Forbidden::Loopback)),
            ("169.254.169.254", Some(Forbidden::Metadata)),
            ("169.254.0.1", Some(Forbidden::LinkLocal)),
            ("172.15.255.255", None),
            ("172.16.0.1", Some(Forbidden::Private)),
            ("172.31.255.255", Some(Forbidden::Private)),
            ("172.32.0.0", None),
            ("192.0.0.8", Some(Forbidden::Reserved)),
            ("192.0.2.1", Some(Forbidden::Documentation)),
            ("198.51.100.7", Some(Forbidden::Documentation)),
            ("203.0.113.9", Some(Forbidden::Documentation)),
            ("192.168.1.1", Some(Forbidden::Private)),
            ("192.169.0.1", None),
            ("198.18.0.1", Some(Forbidden::Reserved)),
            ("198.19.255.255", Some(Forbidden::Reserved)),
            ("198.20.0.0", None),
            ("224.0.0.1", Some(Forbidden::Multicast)),
            ("239.255.255.250", Some(Forbidden::Multicast)),
            ("240.0.0.1", Some(Forbidden::Reserved)),
            ("255.255.255.254", Some(Forbidden::Reserved)),
            ("255.255.255.255", Some(Forbidden::Broadcast)),
            ("1.1.1.1", None),
            ("8.8.8.8", None),
            ("93.184.216.34", None),
            ("223.255.255.255", None),
        ];
        for (text, expected) in cases {
            assert_eq!(check(text), expected, "{text}");
        }
    }

    #[test]
    fn ipv6_ranges() {
        let cases = [
            ("::", Some(Forbidden::Unspecified)),
            ("::1", Some(Forbidden::Loopback)),
            ("fe80::1", Some(Forbidden::LinkLocal)),
            ("febf:ffff::1", Some(Forbidden::LinkLocal)),
            ("fec0::1", Some(Forbidden::Private)),
            ("fc00::1", Some(Forbidden::UniqueLocal)),
            ("fd12:3456::1", Some(Forbidden::UniqueLocal)),
            ("fd00:ec2::254", Some(Forbidden::Metadata)),
            ("ff02::1", Some(Forbidden::Multicast)),
            ("ff05::1:3", Some(Forbidden::Multicast)),
            ("2001:db8::1", Some(Forbidden::Documentation)),
            ("3fff:abc::1", Some(Forbidden::Documentation)),
            ("2001:0:4136:e378::1", Some(Forbidden::Reserved)),
            ("100::1", Some(Forbidden::Reserved)),
            ("64:ff9b:1::a00:1", Some(Forbidden::Private)),
            ("2606:4700:4700::1111", None),
            ("2001:4860:4860::8888", None),
            ("2a00:1450::1", None),
        ];
        for (text, expected) in cases {
            assert_eq!(check(text), expected, "{text}");
        }
    }

    #[test]
    fn ipv4_in_ipv6_forms_are_judged_by_the_embedded_address() {
        let cases = [
            ("::ffff:127.0.0.1", Some(Forbidden::Loopback)),
            ("::ffff:10.0.0.5", Some(Forbidden::Private)),
            ("::ffff:192.168.0.1", Some(Forbidden::Private)),
            ("::ffff:169.254.169.254", Some(Forbidden::Metadata)),
            ("::ffff:100.64.0.1", Some(Forbidden::SharedAddressSpace)),
            ("::ffff:0.0.0.0", Some(Forbidden::Unspecified)),
            ("::ffff:224.0.0.1", Some(Forbidden::Multicast)),
            ("::ffff:255.255.255.255", Some(Forbidden::Broadcast)),
            ("::ffff:8.8.8.8", None),
            ("::127.0.0.1", Some(Forbidden::Loopback)),
            ("::10.1.2.3", Some(Forbidden::Private)),
            ("::8.8.8.8", Some(Forbidden::Reserved)),
            ("64:ff9b::7f00:1", Some(Forbidden::Loopback)),
            ("64:ff9b::a9fe:a9fe", Some(Forbidden::Metadata)),
            ("64:ff9b::808:808", None),
            ("2002:7f00:1::", Some(Forbidden::Loopback)),
            ("2002:c0a8:101::1", Some(Forbidden::Private)),
            ("2002:808:808::1", None),
        ];
        for (text, expected) in cases {
            assert_eq!(check(text), expected, "{text}");
        }
    }

    #[test]
    fn metadata_names_are_recognised_in_any_case_with_a_trailing_dot() {
        assert!(is_metadata_name("metadata.google.internal"));
        assert!(is_metadata_name("METADATA.Google.Internal."));
        assert!(is_metadata_name("metadata"));
        assert!(!is_metadata_name("metadata.example.org"));
    }

    #[test]
    fn every_class_has_a_description() {
        assert_eq!(Forbidden::Private.to_string(), "a private address");
        assert_eq!(Forbidden::Metadata.to_string(), "a cloud metadata address");
    }
}
