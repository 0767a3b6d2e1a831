use super::*;
use crate::time::MICROS_PER_HOUR;

const H: i64 = MICROS_PER_HOUR;

fn node(capacity_type: &str) -> Node {
    Node {
        cluster: "demo".into(),
        node: "s1".into(),
        resource_id: Some("i-s1".into()),
        gpu_count: 2,
        gpu_model: "A100".into(),
        capacity_type: capacity_type.into(),
        gpu_cost_share: 1.0,
        gpu_replicas: 1,
    }
}

#[test]
fn spot_is_known_from_the_node_then_the_pricing_category_then_the_description() {
    let line = |category, description| NodeLine {
        pricing_category: category,
        charge_description: description,
        ..NodeLine::default()
    };
    let standard = line(Some("Standard"), Some("p4d instance"));
    assert_eq!(
        spot_evidence(&node("spot"), &[standard]),
        Some(SpotEvidence::CapacityType)
    );
    assert_eq!(spot_evidence(&node("on_demand"), &[standard]), None);
    assert_eq!(
        spot_evidence(&node("on_demand"), &[standard, line(Some("Dynamic"), None)]),
        Some(SpotEvidence::PricingCategory)
    );
    assert_eq!(
        spot_evidence(
            &node("on_demand"),
            &[line(None, Some("$1.00 per Linux Spot Instance-hour"))]
        ),
        Some(SpotEvidence::ChargeDescription)
    );
    // Committed prices are a discount, not spot.
    assert_eq!(
        spot_evidence(&node("reserved"), &[line(Some("Committed"), None)]),
        None
    );
}

#[test]
fn billed_lines_are_prorated_and_a_missing_list_cost_is_unknown() {
    let day = Span::new(0, 24 * H);
    let line = |effective, list| NodeLine {
        charge_period: day,
        effective_cost: effective,
        list_cost: list,
        ..NodeLine::default()
    };
    // 6 of 24 hours: 48 × 6/24 = 12, 120 × 6/24 = 30.
    let window = Span::new(0, 6 * H);
    assert_eq!(
        billed_in(&[line(48.0, Some(120.0))], window),
        Some((12.0, Some(30.0)))
    );
    assert_eq!(
        billed_in(&[line(48.0, Some(120.0)), line(24.0, None)], window),
        Some((18.0, None))
    );
    assert_eq!(billed_in(&[], window), None);
}

#[test]
fn a_billed_node_saves_its_list_cost_less_what_it_paid_lost_and_ran() {
    // 48 GPU-hours at 1.00, billed 48 against a list of 120; 8 GPU-hours lost after checkpoints,
    // 3.00 of operations: 120 − 48 − 8 × 1.00 − 3 = 61.
    let savings = savings(&SpotNode {
        gpu_hours: 48.0,
        gpu_cost: 48.0,
        billed: Some((48.0, Some(120.0))),
        on_demand_rate: Some(4.0),
        lost_gpu_hours: 8.0,
        operations_cost: 3.0,
    });
    assert_eq!(savings.on_demand, Some((120.0, OnDemandSource::ListCost)));
    assert_eq!(
        (savings.discount(), savings.recompute_cost, savings.net()),
        (Some(72.0), 8.0, Some(61.0))
    );
}

#[test]
fn recompute_beyond_the_discount_makes_spot_a_loss() {
    // Rate card: 10 GPU-hours at 0.70 spot, 1.00 on demand; all 10 lost (no checkpoint):
    // 10 − 7 − 10 × 0.70 − 0.50 = −4.50.
    let savings = savings(&SpotNode {
        gpu_hours: 10.0,
        gpu_cost: 7.0,
        billed: None,
        on_demand_rate: Some(1.0),
        lost_gpu_hours: 10.0,
        operations_cost: 0.5,
    });
    assert_eq!(savings.on_demand, Some((10.0, OnDemandSource::RateCard)));
    assert_eq!(savings.discount(), Some(3.0));
    assert!((savings.recompute_cost - 7.0).abs() < 1e-12);
    assert!((savings.net().unwrap() + 4.5).abs() < 1e-12);
    let unknown = super::savings(&SpotNode {
        on_demand_rate: None,
        ..SpotNode::default()
    });
    assert_eq!((unknown.discount(), unknown.net()), (None, None));
}
