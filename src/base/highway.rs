//! The group lock's field names: Redisson's `Hash.hash128toBase64`, the 128-bit HighwayHash
//! (the `highway` crate) of the value under Redisson's key, both halves big-endian, in
//! standard base64 (the `base64` crate) without its `==`. A pure function, tested against
//! fields Redisson's own implementation computed.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD_NO_PAD;
use highway::{HighwayHash, HighwayHasher, Key};

/// Redisson's key for the group lock's fields (its `misc/Hash.KEY`).
const REDISSON_KEY: [u64; 4] =
    [0x9e37_79b9_7f4a_7c15, 0xf39c_c060_5ced_c834, 0x1082_276b_f3a2_7251, 0xf86c_6a11_d0c1_8e95];

/// The name of the hash field that stands for `value` in a group lock (22 characters).
pub(crate) fn group_field(value: &[u8]) -> String {
    let [high, low] = HighwayHasher::new(Key(REDISSON_KEY)).hash128(value);
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&high.to_be_bytes());
    bytes[8..].copy_from_slice(&low.to_be_bytes());
    // 16 bytes end in one group of two padding characters, which Redisson cuts.
    STANDARD_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fields computed by Redisson's own `HighwayHash` and `hash128toBase64` over the UTF-8
    /// bytes (what its `StringCodec` encodes): group names as users write them, several
    /// packets, non-ASCII.
    #[test]
    fn group_fields_are_redissons() {
        for (value, field) in [
            ("Jack_001", "7pNoDdizVy2xY792MaFv+w"),
            ("Mary_002", "kIX2DFOX4IWct7G7K6tV9A"),
            ("0123456789abcdef0123456789abcdef0123456789", "RajIAtkm4l7eM9bs8Z73Iw"),
            ("abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789", "pbTN9NBQjGwfcJUYoDvShA"),
            ("été-42", "d3aSL/3UqTFjTZEUDgpKsQ"),
        ] {
            assert_eq!(group_field(value.as_bytes()), field, "{value:?}");
        }
    }

    /// Every length from 0 to 64 bytes, so every remainder past whole 32-byte packets (0 to
    /// 31), with none, one and two packets before it: the first n bytes of [`PREFIXES`],
    /// whose fields Redisson's own `HighwayHash` computed (4.7.1-SNAPSHOT, `misc/HighwayHash`
    /// with `misc/Hash`'s key and packet loop).
    #[test]
    fn every_remainder_length_gives_redissons_field() {
        for (n, field) in REDISSON_PREFIX_FIELDS.iter().enumerate() {
            assert_eq!(group_field(&PREFIXES[..n]), *field, "the first {n} bytes");
        }
    }

    const PREFIXES: &[u8; 64] = b"abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ-_";

    const REDISSON_PREFIX_FIELDS: [&str; 65] = [
        "t6rZwibGo2uy1OSmNVe8pg",
        "qwvAS12pR0CgRitaypEjUw",
        "qIx8Ray65QDI9s9SyboNig",
        "BhA5LsZVetaLy1jDRVlHJg",
        "haHCdewnDAU7SZwj3LgylA",
        "hfWj1wpMNXSGnlmtGr6oUA",
        "+heudOGmFN+Mxv/r8QJUag",
        "P6TpLrU4Dz8XExotmdI1nA",
        "omG782WBnZu4wQ1oFrUAfQ",
        "gDdRq7MNKERuQDuzVo934Q",
        "AzBCYTRYmOvGzFXTImatpg",
        "Lm8Bo1Ag2Oe4G7jiSEYc8w",
        "pZQkrQ/sq98ztJnd06zfXA",
        "0b2hRkeWcRRxx1GziLFDDw",
        "tGBc60pg1lIOXUz41TCy8Q",
        "fbvr+UR0uYE5hcFqmrwKxg",
        "DRQHuJNg2ZB9Ji9kknWISA",
        "Oh8rQdv3ax3DyyyWvauaGQ",
        "G8DoLTsjKkhHOiXq0vM84Q",
        "OISRjVF8T6bpm/jNko6+6Q",
        "5AsCb9evagfvCnS1taVhcg",
        "McEbIae+3QryOp4mzzC72A",
        "dLq3hhpYqAAZz1Sd60/Hqw",
        "bathvS7ctFZZfXAXHYcihA",
        "03/GhCdUPutqSEzxq1WSVw",
        "6J/8zTb0Doq4OrXpDdfR5Q",
        "TmUoRoftFSHry6UeiUSHpQ",
        "N7/47gMBjKRJojRAB0ZDLA",
        "+ZNSdwV+xGERRqNbesJGfw",
        "iSDp7XtbgB/7a9Sh+KBu+Q",
        "wBnSNodnfbuHthT3Fk8ecg",
        "A21sggdwihG0NSkaxSNQ9g",
        "UvL6UsyY2Fdfr5Y3tauCmQ",
        "wD9OKwY7gMqg1tHiQjuIFA",
        "8wRltxYJje4T/i56eNha8Q",
        "5fOFF6qWdKSqbRKUG6YBig",
        "nMtxa73M/ZjwHCcA4AdYhg",
        "Pv7Sp+0f7tgi4vKkEoCl5g",
        "Qrpnb5MEuvoaAvob/Zjazw",
        "M2qqK/YZOUeRXRLzmpmgcg",
        "wE8cdw1bLBbk+cDzrM5nIA",
        "24hlStwhNRMMIpo3gBo91Q",
        "xvuL2snfxQS64vSI8xKarQ",
        "Z1Qp+op989MmoYsixCxr9w",
        "rvFGKq7JR8m5V9yNUl4VjA",
        "t4/wawKhTFsMp3PhQ54xCA",
        "Hl0V1nWbjw4fp2V/qH/Hcg",
        "lEZbN5NMbgJuMD+TPMaYQw",
        "NaGPUoXAb/8aK0kJN6HUnA",
        "u47G+1X/ksPIBX65bPcZTQ",
        "5qWwfzfwqHKvqK9aOLzYTA",
        "NubVXui/urCyqIm9VfmFuQ",
        "7IMXGbA7PkSVARPElOLhwA",
        "AlxvmBvCL8TxXebLbpRqog",
        "GvTuR6VnPJL+YU/nIvQm8A",
        "nhdsUEJNQjCf3aiiiFDLOw",
        "XdLF/bmT4c+cr9RCO9aMPA",
        "ENOI9DTKZBlIcKtmEaPAnA",
        "JVWsx2jv6SSn9FkWgQhlEg",
        "TGrYnzAjP8DO2x1ttcPAEA",
        "2t7M3OfDmh0H8g1of3rcDA",
        "zv2my2qDfE6KUNz/Wf2QTA",
        "rNYXvh3/g5nosFxOsM7AZw",
        "TYrRqmMXBhvsrllgMxcybQ",
        "yDonC3iRJwc59jtO7BMk0w",
    ];
}
