//! Stateless pseudo-randomness for values drawn per sample (a month has millions): a hash of the
//! sample's coordinates, so any sample can be drawn in any order and always comes out the same.
//! The plan itself draws from a seeded ChaCha stream (`scenario.rs`).

/// The splitmix64 finaliser: a well-mixed 64-bit hash of `x`.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A uniform value in `[0, 1)` for a key.
pub fn unit(key: u64) -> f64 {
    (mix(key) >> 11) as f64 / (1u64 << 53) as f64
}

/// A uniform value in `[low, high)` for the coordinates `(a, b, c)`.
pub fn draw(a: u64, b: u64, c: u64, low: f64, high: f64) -> f64 {
    let key = mix(a ^ mix(b ^ mix(c)));
    low + unit(key) * (high - low)
}
