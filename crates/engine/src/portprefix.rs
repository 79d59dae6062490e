//! Port ranges as the datapath sees them: aligned power-of-two blocks (a port and a prefix
//! length over its 16 bits), the way Cilium's policy map keys ports.

/// Splits the inclusive range `lo..=hi` into the fewest aligned prefixes `(port, prefix_len)`,
/// where a prefix of length `len` covers `2^(16-len)` ports starting at `port`.
pub fn range_to_prefixes(lo: u16, hi: u16) -> Vec<(u16, u8)> {
    let mut out = Vec::new();
    let (mut start, end) = (u32::from(lo), u32::from(hi));
    while start <= end {
        // The largest block aligned at `start` that stays within the range.
        let mut size_bits = start.trailing_zeros().min(16);
        while size_bits > 0 && start + (1 << size_bits) - 1 > end {
            size_bits -= 1;
        }
        out.push((start as u16, (16 - size_bits) as u8));
        start += 1 << size_bits;
    }
    out
}

/// The inclusive range a prefix covers.
pub fn prefix_range(port: u16, len: u8) -> (u16, u16) {
    let span = 1u32 << (16 - u32::from(len));
    let start = u32::from(port) & !(span - 1);
    (start as u16, (start + span - 1) as u16)
}

/// `port` masked to a prefix of length `len`.
pub fn mask(port: u16, len: u8) -> u16 {
    prefix_range(port, len).0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn examples() {
        assert_eq!(range_to_prefixes(80, 80), vec![(80, 16)]);
        assert_eq!(range_to_prefixes(0, 65535), vec![(0, 0)]);
        assert_eq!(range_to_prefixes(80, 81), vec![(80, 15)]);
        assert_eq!(range_to_prefixes(81, 82), vec![(81, 16), (82, 16)]);
        assert_eq!(range_to_prefixes(1, 65535).len(), 16);
        assert_eq!(prefix_range(80, 15), (80, 81));
        assert_eq!(prefix_range(1234, 0), (0, 65535));
    }

    proptest! {
        #[test]
        fn prefixes_cover_exactly_the_range(a in any::<u16>(), b in any::<u16>()) {
            let (lo, hi) = (a.min(b), a.max(b));
            let prefixes = range_to_prefixes(lo, hi);
            let mut next = u32::from(lo);
            for (port, len) in prefixes {
                let (s, e) = prefix_range(port, len);
                prop_assert_eq!(u32::from(s), next);
                prop_assert_eq!(port, s);
                next = u32::from(e) + 1;
            }
            prop_assert_eq!(next, u32::from(hi) + 1);
        }
    }
}
