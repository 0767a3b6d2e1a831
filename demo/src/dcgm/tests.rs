use std::io::Read;

use chrono::NaiveDate;
use gpuledger_ingest::{CollectSink, ParseContext, dcgm};
use gpuledger_lake::tables::Table;

use super::*;
use crate::ChunkReader;
use crate::scenario::{DemoSpec, HOUR};

fn scenario(days: u32) -> Scenario {
    Scenario::plan(&DemoSpec {
        gpus: 16,
        days,
        seed: 7,
        start: NaiveDate::from_ymd_opt(2026, 11, 1).unwrap(),
        scrape_interval_s: 30,
    })
}

fn first_scrape(scenario: &Scenario) -> String {
    let mut buf = Vec::new();
    assert!(DcgmScrapes::new(scenario).next_chunk(&mut buf));
    String::from_utf8(buf).unwrap()
}

/// 16 GPUs = 8 nodes × 2; the MIG node's 2 GPUs print a device series and 4 instance series each.
/// Per family: device fields (clock, temperature, power, energy, FB free, FB used) on 14 + 2 = 16
/// series = 96 lines; GPU_UTIL on the 14 whole GPUs; XID on all 14 + 10 = 24; the 3 profiling
/// fields on 14 + 8 = 22 series = 66. 96 + 14 + 24 + 66 = 200 samples, plus 11 × 2 HELP/TYPE.
#[test]
fn one_scrape_of_sixteen_gpus_is_two_hundred_samples() {
    let text = first_scrape(&scenario(1));
    let samples = text.lines().filter(|l| !l.starts_with('#')).count();
    assert_eq!(samples, 200);
    assert_eq!(text.lines().count(), 222);
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("DCGM_FI_DEV_GPU_UTIL{"))
            .count(),
        14
    );
    // 2026-11-01T00:00:00Z in milliseconds.
    assert!(
        text.lines()
            .skip(2)
            .all(|l| l.starts_with('#') || l.ends_with(" 1793491200000"))
    );
}

#[test]
fn series_carry_dcgm_exporter_labels_with_mig_instances_and_pods() {
    let scenario = scenario(1);
    let text = first_scrape(&scenario);
    let mig = &scenario.nodes[3];
    let line = text
        .lines()
        .find(|l| l.starts_with("DCGM_FI_PROF_GR_ENGINE_ACTIVE{") && l.contains("GPU_I_ID=\"2\""))
        .unwrap();
    let expected = format!(
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE{{gpu=\"0\",UUID=\"{}\",pci_bus_id=\"00000000:18:00.0\",device=\"nvidia0\",\
         modelName=\"NVIDIA H100 80GB HBM3\",GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"2\",Hostname=\"h100-mig-01\",\
         DCGM_FI_DRIVER_VERSION=\"550.90.07\",container=\"tei\",namespace=\"search\",pod=\"",
        mig.gpu_uuids[0]
    );
    assert!(line.starts_with(&expected), "{line}");
}

/// An hour of scrapes through the real parser: 120 scrapes × 24 series = 2,880 wide rows holding
/// 120 × 200 = 24,000 samples, nothing rejected; the energy counter never goes back.
#[test]
fn an_hour_parses_back_whole() {
    let scenario = scenario(1);
    let mut scrapes = DcgmScrapes::new(&scenario);
    scrapes.scrapes = 120;
    let mut text = Vec::new();
    ChunkReader::new(scrapes).read_to_end(&mut text).unwrap();
    let mut sink = CollectSink::default();
    let ctx = ParseContext::new("hour.prom", scenario.spec.start_time());
    let stats = dcgm::parse(&mut text.as_slice(), &ctx, &mut sink).unwrap();
    assert_eq!(
        (stats.samples, stats.rows_wide, stats.rejected),
        (24_000, 2_880, 0)
    );
    let batch = sink.table(Table::GpuSamples);
    let energy = batch
        .column_by_name("energy_mj")
        .unwrap()
        .as_any()
        .downcast_ref::<arrow::array::Float64Array>()
        .unwrap();
    let first = energy.iter().flatten().next().unwrap();
    assert!(first >= 1e9, "{first}");
}

/// The fault: XID 79 in the ten minutes before the node goes down, then no series at all from it
/// until it is back up.
#[test]
fn the_faulty_node_reports_xid_79_then_goes_silent() {
    let scenario = scenario(2);
    let fault = scenario.faults[0];
    let node = &scenario.nodes[fault.node].name;
    let mut scrapes = DcgmScrapes::new(&scenario);
    let at = |scrapes: &mut DcgmScrapes, t: i64| {
        let mut buf = Vec::new();
        scrapes.write_scrape(t, (t / 30) as u64, &mut buf);
        String::from_utf8(buf).unwrap()
    };
    let host = format!("Hostname=\"{node}\"");
    let before = at(&mut scrapes, fault.down - 60);
    let xid: Vec<&str> = before
        .lines()
        .filter(|l| l.starts_with("DCGM_FI_DEV_XID_ERRORS{") && l.contains(&host))
        .collect();
    assert_eq!(xid.len(), 2);
    assert!(
        xid.iter().all(|l| l.rsplit(' ').nth(1) == Some("79")),
        "{xid:?}"
    );
    let during = at(&mut scrapes, fault.down + HOUR);
    assert!(!during.contains(&host));
    let after = at(&mut scrapes, fault.up);
    assert!(after.contains(&host));
}
