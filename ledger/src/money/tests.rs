use super::*;

fn m(text: &str) -> Money {
    text.parse().unwrap()
}

#[test]
fn decimal_text_round_trips_at_twelve_places() {
    assert_eq!(m("608").to_string(), "608.000000000000");
    assert_eq!(m("-0.5").to_string(), "-0.500000000000");
    assert_eq!(m("0.000000000001").units(), 1);
    assert_eq!(m("+12.25").units(), 12_250_000_000_000);
    assert_eq!(Money::from_units(-1).to_string(), "-0.000000000001");
    // A precision rounds half-even; width pads as for numbers.
    assert_eq!(format!("{:.2}", m("118.205")), "118.20");
    assert_eq!(format!("{:.2}", m("118.215")), "118.22");
    assert_eq!(format!("{:>10.6}", m("-0.6")), " -0.600000");
    assert_eq!(format!("{:.2}", m("-0.001")), "0.00");
    assert_eq!(format!("{:.0}", m("2.5")), "2");
    assert!("12,5".parse::<Money>().is_err());
    assert!("".parse::<Money>().is_err());
    assert!("1e3".parse::<Money>().is_err());
}

#[test]
fn rounding_beyond_twelve_places_is_half_even() {
    // The 13th place decides; exactly half goes to the even neighbour.
    assert_eq!(m("0.0000000000015").units(), 2);
    assert_eq!(m("0.0000000000025").units(), 2);
    assert_eq!(m("0.00000000000250001").units(), 3);
    assert_eq!(m("0.0000000000024999").units(), 2);
    assert_eq!(m("-0.0000000000035").units(), -4);
}

#[test]
fn floats_become_the_decimal_they_stand_for() {
    // 0.10 per GPU-hour × 3 h in floats is 0.30000000000000004: it is 0.30.
    assert_eq!((0.1 * 3.0_f64).to_string(), "0.30000000000000004");
    assert_eq!(Money::from_f64(0.1 * 3.0), m("0.3"));
    assert_eq!(Money::from_f64(1.6 * 4.0), m("6.4"));
    assert_eq!(Money::from_f64(4.8), m("4.80"));
    // 123456.78 has 18 significant digits at 1e-12: still exact.
    assert_eq!(Money::from_f64(123_456.78), m("123456.78"));
    assert_eq!(Money::from_f64(1.0 / 3.0).to_string(), "0.333333333333");
    assert_eq!(Money::from_f64(2.0 / 3.0).to_string(), "0.666666666667");
    assert_eq!(Money::from_f64(-2.5e-13), Money::ZERO);
    assert_eq!(Money::from_f64(f64::NAN), Money::ZERO);
    assert_eq!(m("456.25").to_f64(), 456.25);
}

#[test]
fn sums_are_exact_in_any_order() {
    // 0.1 + 0.2 + 0.3 in floats depends on the order; in Money it is 0.6 either way.
    assert_ne!((0.1 + 0.2) + 0.3, 0.1 + (0.2 + 0.3));
    let parts = [m("0.1"), m("0.2"), m("0.3")];
    let forward: Money = parts.iter().sum();
    let backward: Money = parts.iter().rev().sum();
    assert_eq!((forward, backward), (m("0.6"), m("0.6")));
    assert_eq!(m("1") - m("0.25") + -m("0.5"), m("0.25"));
}

#[test]
fn largest_remainder_adds_back_exactly() {
    // 100.00 over 3 equal teams: 33.333333333333 each leaves 1e-12, which goes to the first.
    let parts = m("100").split_f64(&[1.0, 1.0, 1.0]);
    assert_eq!(
        parts,
        [
            m("33.333333333334"),
            m("33.333333333333"),
            m("33.333333333333")
        ]
    );
    assert_eq!(parts.iter().sum::<Money>(), m("100"));
    // A credit mirrors its charge.
    assert_eq!(
        m("-100").split_f64(&[1.0, 1.0, 1.0]),
        [
            m("-33.333333333334"),
            m("-33.333333333333"),
            m("-33.333333333333")
        ]
    );
    // 1e-12 over 2:1 weights: the quotas are 2/3 and 1/3 of a unit; the larger remainder wins.
    assert_eq!(
        Money::from_units(1).split(&[2, 1]),
        [Money::from_units(1), Money::ZERO]
    );
    // 10.00 over 1:1:1:1:1:1:1 (seven teams): 1.428571428571 each, the 3e-12 left go to the
    // first three.
    let sevenths = m("10").split(&[1; 7]);
    assert_eq!(sevenths[0], m("1.428571428572"));
    assert_eq!(sevenths[3], m("1.428571428571"));
    assert_eq!(sevenths.iter().sum::<Money>(), m("10"));
    // Zero and negative weights get nothing; no weight at all puts it all on the first part.
    assert_eq!(
        m("7").split_f64(&[0.0, -1.0, 3.0]),
        [Money::ZERO, Money::ZERO, m("7")]
    );
    assert_eq!(m("7").split(&[0, 0]), [m("7"), Money::ZERO]);
    assert!(m("7").split(&[]).is_empty());
}

#[test]
fn largest_remainder_holds_for_awkward_amounts_and_weights() {
    // Amounts near the top of the range and weights of very different sizes still add back.
    let weights = [u64::MAX, 1, 3, u64::MAX / 7];
    for amount in [
        Money::from_units(i128::MAX / 2),
        m("0.000000000007"),
        m("-98765432.123456789012"),
    ] {
        assert_eq!(amount.split(&weights).iter().sum::<Money>(), amount);
    }
    let weights = [0.1, 0.2, 0.3, 1e-9, 123.456];
    let amount = m("9999.99");
    assert_eq!(amount.split_f64(&weights).iter().sum::<Money>(), amount);
}

#[test]
fn json_is_a_decimal_string_and_reads_numbers_too() {
    assert_eq!(
        serde_json::to_string(&m("608")).unwrap(),
        "\"608.000000000000\""
    );
    assert_eq!(
        serde_json::from_str::<Money>("\"456.25\"").unwrap(),
        m("456.25")
    );
    assert_eq!(serde_json::from_str::<Money>("4.8").unwrap(), m("4.8"));
}
