//! DuckDB as the benchmarks' peer: a Python process (the `duckdb` package) over the same
//! Parquet files as the lake, each table a view over its `tables/<name>/**/*.parquet`. It reads
//! `threads N` and one SQL statement per line from stdin and answers `<seconds> <cpu seconds>
//! <rows> <first value>`, so it is timed by itself, without the pipe. Shared by `sql_peers.rs` and `build/benches/ledger_build.rs`
//! (`#[path]`). Needs `python3 -m pip install duckdb` (scripts/bench-peers installs it).

#![allow(dead_code)] // each bench uses part of it

use std::io::{BufRead, BufReader, Lines, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

const PEER: &str = r#"
import sys, time, duckdb
con = duckdb.connect()
con.execute("SET TimeZone = 'UTC'")
con.execute("SET enable_progress_bar = false")  # it draws on stdout, which answers here
for table in sys.argv[2:]:
    con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{sys.argv[1]}/tables/{table}/**/*.parquet')")
print(duckdb.__version__, flush=True)
for line in sys.stdin:
    line = line.strip()
    if line.startswith("threads "):
        con.execute(f"SET threads = {int(line.split()[1])}")
        print("ok", flush=True)
        continue
    started, cpu = time.perf_counter(), time.process_time()
    rows = con.execute(line).fetchall()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    first = rows[0][0] if rows else None
    print(f"{seconds} {cpu} {len(rows)} {first}", flush=True)
"#;

pub struct DuckDb {
    child: Child,
    input: Option<ChildStdin>,
    output: Lines<BufReader<ChildStdout>>,
    pub version: String,
}

/// One timed statement: its time in DuckDB, its row count, and the first column of its first
/// row as Python prints it (`None` without rows), for checking both engines agree.
pub struct Answer {
    pub seconds: f64,
    /// The CPU time of all of DuckDB's threads over the statement: less moved than `seconds`
    /// by other work on a shared machine.
    pub cpu_seconds: f64,
    pub rows: usize,
    pub first: String,
}

impl DuckDb {
    /// Whether python3 can import the duckdb package (`scripts/bench-peers` installs it).
    pub fn installed() -> bool {
        Command::new("python3")
            .args(["-c", "import duckdb"])
            .output()
            .is_ok_and(|output| output.status.success())
    }

    /// DuckDB over `tables` of the lake at `data`.
    pub fn over(data: &Path, tables: &[&str]) -> Self {
        let mut child = Command::new("python3")
            .args(["-c", PEER, &data.display().to_string()])
            .args(tables)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let input = child.stdin.take();
        let mut output = BufReader::new(child.stdout.take().expect("piped")).lines();
        let version = output
            .next()
            .expect("DuckDB started (is the duckdb package installed?)")
            .expect("utf-8");
        Self {
            child,
            input,
            output,
            version,
        }
    }

    fn ask(&mut self, line: &str) -> String {
        let input = self.input.as_mut().expect("open");
        writeln!(input, "{}", line.replace('\n', " ")).expect("DuckDB reads");
        self.output.next().expect("DuckDB answered").expect("utf-8")
    }

    pub fn threads(&mut self, threads: usize) {
        assert_eq!(self.ask(&format!("threads {threads}")), "ok");
    }

    pub fn time(&mut self, sql: &str) -> Answer {
        let answer = self.ask(sql);
        let mut parts = answer.splitn(4, ' ');
        let seconds = parts.next().and_then(|s| s.parse::<f64>().ok());
        let cpu_seconds = parts.next().and_then(|s| s.parse::<f64>().ok());
        let rows = parts.next().and_then(|s| s.parse::<usize>().ok());
        let (Some(seconds), Some(cpu_seconds), Some(rows)) = (seconds, cpu_seconds, rows) else {
            panic!("DuckDB answered {answer:?} to {sql}");
        };
        Answer {
            seconds,
            cpu_seconds,
            rows,
            first: parts.next().unwrap_or_default().to_string(),
        }
    }
}

impl Drop for DuckDb {
    fn drop(&mut self) {
        drop(self.input.take());
        let _ = self.child.wait();
    }
}

/// The CPU time this process has used, its threads' user and system time together (Linux's
/// `/proc/self/stat`, in clock ticks of 10 ms); `None` elsewhere.
pub fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command (which may hold spaces) from the third on; utime and stime
    // are the 14th and 15th.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace().skip(11);
    let user: f64 = fields.next()?.parse().ok()?;
    let system: f64 = fields.next()?.parse().ok()?;
    Some((user + system) / 100.0)
}

/// The median of `times`.
pub fn median(times: Vec<f64>) -> f64 {
    spread(&times).0
}

/// The median, least and greatest of `times` (at least one), as the benches print them.
pub fn spread(times: &[f64]) -> (f64, f64, f64) {
    let mut sorted = times.to_vec();
    sorted.sort_by(f64::total_cmp);
    (
        sorted[sorted.len() / 2],
        sorted[0],
        sorted[sorted.len() - 1],
    )
}
