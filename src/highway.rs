//! HighwayHash (Google's keyed hash, the portable algorithm) and the group lock's field
//! names: Redisson's `Hash.hash128toBase64`, the 128-bit hash under Redisson's key, both
//! halves big-endian, in standard base64 without its `==`. Pure functions, tested against
//! fields Redisson computed.

/// Redisson's key for the group lock's fields (`misc/Hash.KEY`).
const REDISSON_KEY: [u64; 4] =
    [0x9e37_79b9_7f4a_7c15, 0xf39c_c060_5ced_c834, 0x1082_276b_f3a2_7251, 0xf86c_6a11_d0c1_8e95];

/// The name of the hash field that stands for `value` in a group lock (22 characters).
pub(crate) fn group_field(value: &[u8]) -> String {
    let [high, low] = hash128(value, REDISSON_KEY);
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&high.to_be_bytes());
    bytes[8..].copy_from_slice(&low.to_be_bytes());
    let mut field = base64(&bytes);
    field.truncate(22);
    field
}

/// Standard base64 (RFC 4648, with `=` padding).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// HighwayHash-128 of `data` under `key`.
pub(crate) fn hash128(data: &[u8], key: [u64; 4]) -> [u64; 2] {
    let mut state = State::new(key);
    let mut packets = data.chunks_exact(32);
    for packet in &mut packets {
        state.update_packet(packet);
    }
    let rest = packets.remainder();
    if !rest.is_empty() {
        state.update_remainder(rest);
    }
    for _ in 0..6 {
        state.permute_and_update();
    }
    let (v0, v1, mul0, mul1) = (&state.v0, &state.v1, &state.mul0, &state.mul1);
    [
        v0[0].wrapping_add(mul0[0]).wrapping_add(v1[2]).wrapping_add(mul1[2]),
        v0[1].wrapping_add(mul0[1]).wrapping_add(v1[3]).wrapping_add(mul1[3]),
    ]
}

struct State {
    v0: [u64; 4],
    v1: [u64; 4],
    mul0: [u64; 4],
    mul1: [u64; 4],
}

impl State {
    fn new(key: [u64; 4]) -> State {
        let mul0 = [0xdbe6_d5d5_fe4c_ce2f, 0xa409_3822_299f_31d0, 0x1319_8a2e_0370_7344, 0x243f_6a88_85a3_08d3];
        let mul1 = [0x3bd3_9e10_cb0e_f593, 0xc0ac_f169_b5f1_8a8c, 0xbe54_66cf_34e9_0c6c, 0x4528_21e6_38d0_1377];
        let v0 = std::array::from_fn(|i| mul0[i] ^ key[i]);
        let v1 = std::array::from_fn(|i| mul1[i] ^ key[i].rotate_left(32));
        State { v0, v1, mul0, mul1 }
    }

    fn update_packet(&mut self, packet: &[u8]) {
        let lane = |i: usize| {
            let mut word = [0u8; 8];
            word.copy_from_slice(&packet[i * 8..i * 8 + 8]);
            u64::from_le_bytes(word)
        };
        self.update([lane(0), lane(1), lane(2), lane(3)]);
    }

    fn update(&mut self, lanes: [u64; 4]) {
        for (i, lane) in lanes.into_iter().enumerate() {
            self.v1[i] = self.v1[i].wrapping_add(self.mul0[i].wrapping_add(lane));
            self.mul0[i] ^= (self.v1[i] & 0xffff_ffff).wrapping_mul(self.v0[i] >> 32);
            self.v0[i] = self.v0[i].wrapping_add(self.mul1[i]);
            self.mul1[i] ^= (self.v0[i] & 0xffff_ffff).wrapping_mul(self.v1[i] >> 32);
        }
        let v1 = self.v1;
        self.v0[0] = self.v0[0].wrapping_add(zipper_merge0(v1[1], v1[0]));
        self.v0[1] = self.v0[1].wrapping_add(zipper_merge1(v1[1], v1[0]));
        self.v0[2] = self.v0[2].wrapping_add(zipper_merge0(v1[3], v1[2]));
        self.v0[3] = self.v0[3].wrapping_add(zipper_merge1(v1[3], v1[2]));
        let v0 = self.v0;
        self.v1[0] = self.v1[0].wrapping_add(zipper_merge0(v0[1], v0[0]));
        self.v1[1] = self.v1[1].wrapping_add(zipper_merge1(v0[1], v0[0]));
        self.v1[2] = self.v1[2].wrapping_add(zipper_merge0(v0[3], v0[2]));
        self.v1[3] = self.v1[3].wrapping_add(zipper_merge1(v0[3], v0[2]));
    }

    /// The last 1 to 31 bytes.
    fn update_remainder(&mut self, bytes: &[u8]) {
        let size = bytes.len();
        let (size_mod4, whole) = (size & 3, size & !3);
        let size64 = size as u64;
        for v in &mut self.v0 {
            *v = v.wrapping_add((size64 << 32).wrapping_add(size64));
        }
        for v in &mut self.v1 {
            let (low, high) = ((*v as u32).rotate_left(size as u32), ((*v >> 32) as u32).rotate_left(size as u32));
            *v = u64::from(low) | (u64::from(high) << 32);
        }
        let mut packet = [0u8; 32];
        packet[..whole].copy_from_slice(&bytes[..whole]);
        if size & 16 != 0 {
            packet[28..32].copy_from_slice(&bytes[whole + size_mod4 - 4..whole + size_mod4]);
        } else if size_mod4 != 0 {
            packet[16] = bytes[whole];
            packet[17] = bytes[whole + (size_mod4 >> 1)];
            packet[18] = bytes[whole + size_mod4 - 1];
        }
        self.update_packet(&packet);
    }

    fn permute_and_update(&mut self) {
        let v0 = self.v0;
        self.update([v0[2].rotate_left(32), v0[3].rotate_left(32), v0[0].rotate_left(32), v0[1].rotate_left(32)]);
    }
}

fn zipper_merge0(v1: u64, v0: u64) -> u64 {
    (((v0 & 0xff00_0000) | (v1 & 0xff_0000_0000)) >> 24)
        | (((v0 & 0xff00_0000_0000) | (v1 & 0xff_0000_0000_0000)) >> 16)
        | (v0 & 0xff_0000)
        | ((v0 & 0xff00) << 32)
        | ((v1 & 0xff00_0000_0000_0000) >> 8)
        | (v0 << 56)
}

fn zipper_merge1(v1: u64, v0: u64) -> u64 {
    (((v1 & 0xff00_0000) | (v0 & 0xff_0000_0000)) >> 24)
        | (v1 & 0xff_0000)
        | ((v1 & 0xff00_0000_0000) >> 16)
        | ((v1 & 0xff00) << 24)
        | ((v0 & 0xff_0000_0000_0000) >> 8)
        | ((v1 & 0xff) << 48)
        | (v0 & 0xff00_0000_0000_0000)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fields computed by Redisson's own `HighwayHash` and `hash128toBase64` over the UTF-8
    /// bytes (what its `StringCodec` encodes): empty, a remainder of every branch (1 to 3
    /// bytes past whole words, 16 to 31 bytes), exactly one packet, several, non-ASCII.
    #[test]
    fn group_fields_are_redissons() {
        for (value, field) in [
            ("", "t6rZwibGo2uy1OSmNVe8pg"),
            ("Jack_001", "7pNoDdizVy2xY792MaFv+w"),
            ("Mary_002", "kIX2DFOX4IWct7G7K6tV9A"),
            ("a", "qwvAS12pR0CgRitaypEjUw"),
            ("0123456789abcdef0123456789abcdef0123456789", "RajIAtkm4l7eM9bs8Z73Iw"),
            ("abcdefghijklmnopqrs", "OISRjVF8T6bpm/jNko6+6Q"),
            ("abcdefghijklmnopqrstuvwxyz01234", "A21sggdwihG0NSkaxSNQ9g"),
            ("abcdefghijklmnopqrstuvwxyz012345", "UvL6UsyY2Fdfr5Y3tauCmQ"),
            ("abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789", "pbTN9NBQjGwfcJUYoDvShA"),
            ("été-42", "d3aSL/3UqTFjTZEUDgpKsQ"),
        ] {
            assert_eq!(group_field(value.as_bytes()), field, "{value:?}");
        }
    }

    #[test]
    fn base64_pads_as_the_standard_says() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }
}
