//! Runs the binary against a throwaway lake, and reads query results back as JSON.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

/// A lake in a temporary directory with a given catalog.
pub struct Ledger {
    pub dir: tempfile::TempDir,
    pub catalog: String,
    pub backend: &'static str,
}

impl Ledger {
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("lake")
    }

    pub fn command(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_gpuledger"));
        command
            .arg("--data")
            .arg(self.data_dir())
            .arg("--catalog")
            .arg(&self.catalog);
        command
            .env_remove("GPULEDGER_DATA")
            .env_remove("GPULEDGER_CATALOG");
        command
    }

    /// Runs `gpuledger <args>` and returns its output, whatever the exit code.
    pub fn run(&self, args: &[&str]) -> Output {
        self.command().args(args).output().expect("run gpuledger")
    }

    /// Runs `gpuledger <args>` with `stdin` as standard input.
    pub fn run_with_stdin(&self, args: &[&str], stdin: &[u8]) -> Output {
        use std::io::Write;
        let mut child = self
            .command()
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn gpuledger");
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        child.wait_with_output().unwrap()
    }

    /// `gpuledger ingest <source> <path>`, which must succeed without rejections.
    pub fn ingest_ok(&self, source: &str, path: &Path, extra: &[&str]) -> String {
        let mut args = vec!["ingest", source, path.to_str().unwrap()];
        args.extend_from_slice(extra);
        let out = self.run(&args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "[{}] ingest {source} {}: {}",
            self.backend,
            path.display(),
            describe(&out)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Rows of a query as JSON objects.
    pub fn sql(&self, query: &str) -> Vec<Value> {
        let out = self.run(&["sql", query, "--format", "json"]);
        assert!(
            out.status.success(),
            "[{}] sql {query}: {}",
            self.backend,
            describe(&out)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        match serde_json::from_str::<Value>(text.trim()) {
            Ok(Value::Array(rows)) => rows,
            _ if text.trim().is_empty() => vec![],
            other => panic!("not a JSON array: {text} ({other:?})"),
        }
    }

    /// The single value of a one-row, one-column query.
    pub fn scalar(&self, query: &str) -> Value {
        let rows = self.sql(query);
        assert_eq!(rows.len(), 1, "[{}] {query} gave {rows:?}", self.backend);
        let row = rows[0].as_object().unwrap();
        assert_eq!(row.len(), 1, "{query} gave {row:?}");
        row.values().next().unwrap().clone()
    }
}

pub fn describe(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// One fresh lake per catalog backend.
pub fn ledgers() -> Vec<Ledger> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let urls = runtime.block_on(gpuledger_lake::testing::catalog_urls(dir.path()));
    urls.into_iter()
        .map(|(backend, url)| {
            let dir = tempfile::tempdir().unwrap();
            // Each SQLite catalog lives in its own lake directory.
            let catalog = if backend == "sqlite" {
                format!(
                    "sqlite://{}?mode=rwc",
                    dir.path().join("catalog.db").display()
                )
            } else {
                url
            };
            Ledger {
                dir,
                catalog,
                backend,
            }
        })
        .collect()
}

/// A real sample file under `../shared/data`, or `None` when the folder is absent (the test then
/// says it skipped).
pub fn shared(relative: &str) -> Option<PathBuf> {
    gpuledger_ingest::testdata::shared_data(relative)
}

/// A memory field of `/proc/<pid>/status` in kB: `VmRSS` (resident now) or `VmHWM` (its peak).
pub fn memory_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// `gpuledger serve` on free loopback ports, stopped (SIGTERM, then waited for) when dropped.
pub struct Server {
    child: std::process::Child,
    pub base: String,
    /// `postgres://127.0.0.1:<port>`, the PostgreSQL wire protocol.
    pub postgres: String,
    pub http: reqwest::blocking::Client,
}

impl Ledger {
    /// Starts `gpuledger serve --listen 127.0.0.1:0 --pg-listen 127.0.0.1:0 <extra>` and waits
    /// until it answers. The live ledger is off unless `extra` sets `--ledger-interval`: a round
    /// firing at a moment of its own would land a batch and take memory in the middle of what a
    /// test counts (the live ledger's own tests set the interval).
    pub fn serve(&self, extra: &[&str]) -> Server {
        serve_command(self.command(), extra)
    }

    /// [`Self::serve`] with the server's log (its stderr) written to `log`.
    pub fn serve_logging_to(&self, extra: &[&str], log: &Path) -> Server {
        let log = std::fs::File::create(log).expect("create the server's log");
        spawn_serve(self.command(), extra, Stdio::from(log))
    }
}

/// [`Ledger::serve`] for a `gpuledger` command set up by the caller (another `--data`, its
/// environment): `serve --listen 127.0.0.1:0 --pg-listen 127.0.0.1:0 <extra>`.
pub fn serve_command(command: Command, extra: &[&str]) -> Server {
    spawn_serve(command, extra, Stdio::inherit())
}

fn spawn_serve(mut command: Command, extra: &[&str], stderr: Stdio) -> Server {
    {
        use std::io::BufRead;
        let live = if extra.contains(&"--ledger-interval") {
            &[][..]
        } else {
            &["--ledger-interval", "0s"][..]
        };
        let mut child = command
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--pg-listen",
                "127.0.0.1:0",
            ])
            .args(live)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn gpuledger serve");
        let stdout = child.stdout.take().unwrap();
        let mut lines = std::io::BufReader::new(stdout).lines();
        // The PostgreSQL port is announced first, then HTTP's.
        let mut postgres = String::new();
        let base = loop {
            let line = lines
                .next()
                .expect("serve exited before it said where it listens")
                .unwrap();
            if let Some(url) = line.strip_prefix("gpuledger postgres ") {
                postgres = url.to_string();
            }
            if let Some(url) = line.strip_prefix("gpuledger serving ") {
                break url.to_string();
            }
        };
        // Keep draining stdout so that the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Server {
            child,
            base,
            postgres,
            http: reqwest::blocking::Client::new(),
        }
    }
}

impl Ledger {
    /// `gpuledger token create --scope <scope> [--team <team>]`: the token.
    pub fn token(&self, scope: &str, team: Option<&str>) -> String {
        let mut args = vec!["token", "create", "--scope", scope];
        if let Some(team) = team {
            args.extend(["--team", team]);
        }
        let out = self.run(&args);
        assert!(out.status.success(), "{}", describe(&out));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }
}

impl Server {
    /// The server's process id (for /proc/<pid>/status).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `POST /v1/sql` as `token`: the status and the body as JSON.
    pub fn sql(&self, token: &str, query: &str) -> (u16, Value) {
        let response = self
            .http
            .post(self.url("/v1/sql"))
            .bearer_auth(token)
            .json(&serde_json::json!({ "query": query }))
            .send()
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().unwrap())
    }

    /// `GET path` with `token`.
    pub fn get_as(&self, token: &str, path: &str) -> reqwest::blocking::Response {
        self.http
            .get(self.url(path))
            .bearer_auth(token)
            .send()
            .unwrap()
    }

    /// `GET /metrics`: the Prometheus text.
    pub fn metrics(&self) -> String {
        self.http
            .get(self.url("/metrics"))
            .send()
            .unwrap()
            .text()
            .unwrap()
    }

    /// The value of the gauge `gpuledger_<name>` in `/metrics` now.
    pub fn gauge(&self, name: &str) -> i64 {
        let metrics = self.metrics();
        let line = metrics
            .lines()
            .find(|line| line.starts_with(&format!("gpuledger_{name} ")))
            .unwrap_or_else(|| panic!("no {name} in {metrics}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    }

    /// The rows of a query that must succeed.
    pub fn rows(&self, token: &str, query: &str) -> Vec<Value> {
        let (status, body) = self.sql(token, query);
        assert_eq!(status, 200, "{query}: {body}");
        body.as_array().unwrap().clone()
    }
}

impl Server {
    /// `kill -9`: the process ends at once, wherever it was (std's `Child::kill` is SIGKILL).
    pub fn kill(&mut self) {
        self.child.kill().expect("SIGKILL serve");
        self.child.wait().expect("reap serve");
    }
}

impl Server {
    /// SIGTERM, the graceful path users take: its exit status once it has stopped (a server
    /// still running a minute later is killed, and the test fails).
    pub fn stop(mut self) -> std::process::ExitStatus {
        Command::new("kill")
            .arg(self.child.id().to_string())
            .status()
            .expect("SIGTERM serve");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for serve") {
                return status;
            }
            if std::time::Instant::now() > deadline {
                self.kill();
                panic!("serve did not stop within a minute of SIGTERM");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Already killed and reaped: its pid may belong to another process by now.
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        // SIGTERM: the graceful path users take.
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

impl Server {
    /// `GET path` as `token`: the status and the body as JSON (null when there is none).
    pub fn get(&self, token: &str, path: &str) -> (u16, Value) {
        let response = self.get_as(token, path);
        let status = response.status().as_u16();
        (status, response.json().unwrap_or(Value::Null))
    }

    /// `POST /v1/budgets` as `token`: the status and the body as JSON.
    pub fn create_budget(&self, token: &str, name: &str, spec: Value) -> (u16, Value) {
        self.send(
            "POST",
            token,
            "/v1/budgets",
            &serde_json::json!({"name": name, "spec": spec}),
        )
    }

    /// `method path` with a JSON body as `token`: the status and the body as JSON.
    pub fn send(&self, method: &str, token: &str, path: &str, body: &Value) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let response = self
            .http
            .request(method, self.url(path))
            .bearer_auth(token)
            .json(body)
            .send()
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().unwrap_or(Value::Null))
    }

    /// Pushes a Prometheus remote-write `request` (protobuf, see [`protobuf`]) for `cluster` as
    /// `token`, snappy-compressed as Prometheus sends it; it must be accepted.
    pub fn remote_write(&self, token: &str, cluster: &str, request: &[u8]) {
        let response = self
            .http
            .post(self.url(&format!("/v1/prom/write?cluster={cluster}")))
            .bearer_auth(token)
            .header("Content-Encoding", "snappy")
            .header("Content-Type", "application/x-protobuf")
            .header("X-Prometheus-Remote-Write-Version", "0.1.0")
            .body(snap::raw::Encoder::new().compress_vec(request).unwrap())
            .send()
            .unwrap();
        assert_accepted(response);
    }
}

/// Asserts that an ingest request was accepted (202), showing the body when it was not.
pub fn assert_accepted(response: reqwest::blocking::Response) {
    let status = response.status().as_u16();
    assert_eq!(status, 202, "{}", response.text().unwrap());
}

/// A metrics endpoint on a free local port that answers every scrape with `body`: its URL, and
/// how many scrapes it answered.
pub fn exporter(body: &str) -> (String, Arc<AtomicUsize>) {
    let body = body.to_string();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/metrics", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&hits);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            counter.fetch_add(1, Ordering::SeqCst);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (url, hits)
}

/// Protocol buffers by hand (varints and length-delimited fields), so that the test does not
/// share the server's message definitions.
pub mod protobuf {
    pub fn varint(out: &mut Vec<u8>, mut value: u64) {
        while value >= 0x80 {
            out.push((value as u8) | 0x80);
            value >>= 7;
        }
        out.push(value as u8);
    }

    pub fn bytes(out: &mut Vec<u8>, field: u64, content: &[u8]) {
        varint(out, field << 3 | 2);
        varint(out, content.len() as u64);
        out.extend_from_slice(content);
    }

    /// prometheus.TimeSeries: labels (field 1) and samples (field 2: value double 1, timestamp int64 2).
    pub fn time_series(labels: &[(&str, &str)], samples: &[(f64, i64)]) -> Vec<u8> {
        let mut series = Vec::new();
        for (name, value) in labels {
            let mut label = Vec::new();
            bytes(&mut label, 1, name.as_bytes());
            bytes(&mut label, 2, value.as_bytes());
            bytes(&mut series, 1, &label);
        }
        for (value, timestamp) in samples {
            let mut sample = Vec::new();
            varint(&mut sample, 1 << 3 | 1);
            sample.extend_from_slice(&value.to_le_bytes());
            varint(&mut sample, 2 << 3);
            varint(&mut sample, *timestamp as u64);
            bytes(&mut series, 2, &sample);
        }
        series
    }
}

/// `psql` connected to `server` as `token` (any user name), running each of `commands` in
/// unaligned output with verbose errors (`ERROR:  <SQLSTATE>: …`); `sslmode` as libpq takes it,
/// `options` more psql flags (`-t` for tuples only).
pub fn psql(
    server: &Server,
    token: &str,
    sslmode: &str,
    options: &[&str],
    commands: &[&str],
) -> Output {
    let address = server.postgres.strip_prefix("postgres://").unwrap();
    let (host, port) = address.rsplit_once(':').unwrap();
    let mut command = Command::new("psql");
    command
        .args([
            "-X",
            "-A",
            "-v",
            "ON_ERROR_STOP=1",
            "-v",
            "VERBOSITY=verbose",
        ])
        .args(options)
        .args(["-h", host, "-p", port, "-U", "analyst", "-d", "gpuledger"])
        .env("PGPASSWORD", token)
        .env("PGSSLMODE", sslmode)
        .env("PGCONNECT_TIMEOUT", "10");
    for c in commands {
        command.args(["-c", c]);
    }
    command.output().expect("run psql (postgresql-client)")
}

/// The SQLSTATE psql reports for `query`, which must fail.
pub fn psql_sqlstate(server: &Server, token: &str, query: &str) -> String {
    let out = psql(server, token, "disable", &[], &[query]);
    let shown = &query[..query.char_indices().nth(40).map_or(query.len(), |(i, _)| i)];
    assert!(!out.status.success(), "{shown}… succeeded");
    let stderr = String::from_utf8(out.stderr).unwrap();
    stderr
        .split("ERROR:  ")
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .unwrap_or_else(|| panic!("{shown}…: no SQLSTATE in {stderr}"))
        .to_string()
}

/// `python3` running `script` with psycopg, the connection string to `server` as `token` in
/// `sys.argv[1]`.
pub fn psycopg(server: &Server, token: &str, script: &str) -> Command {
    let dsn = format!(
        "{}/gpuledger?user=analyst&password={token}&sslmode=disable",
        server.postgres
    );
    let mut command = Command::new("python3");
    command.args(["-c", script, &dsn]);
    command
}

/// Whether DuckDB's Python package is here; `scripts/test` installs it, so CI always has it.
pub fn duckdb_available() -> bool {
    let found = Command::new("python3")
        .args(["-c", "import duckdb"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must compare with DuckDB: `python3 -m pip install duckdb` (scripts/test does)"
        );
        eprintln!("skipped: DuckDB comparison (python3 cannot import duckdb)");
    }
    found
}

/// `gpuledger worker` processes on free loopback ports over a ledger's lake, stopped (SIGTERM,
/// then waited for) when dropped.
pub struct Workers {
    children: Vec<std::process::Child>,
    /// `127.0.0.1:<port>` of each, in the order started.
    pub addresses: Vec<String>,
}

impl Ledger {
    /// Starts `count` workers over this lake (`gpuledger worker --listen 127.0.0.1:0 <extra>`)
    /// and waits until each listens.
    pub fn workers(&self, count: usize, extra: &[&str]) -> Workers {
        start_workers(|| self.command(), count, extra)
    }
}

/// `count` workers of the `gpuledger` commands `command` makes (its `--data`, `--catalog`).
pub fn start_workers(command: impl Fn() -> Command, count: usize, extra: &[&str]) -> Workers {
    use std::io::BufRead;
    let mut workers = Workers {
        children: Vec::new(),
        addresses: Vec::new(),
    };
    for _ in 0..count {
        let mut child = command()
            .args(["worker", "--listen", "127.0.0.1:0"])
            .args(extra)
            .env_remove("GPULEDGER_WORKERS")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn gpuledger worker");
        let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let address = loop {
            let line = lines
                .next()
                .expect("the worker exited before it said where it listens")
                .unwrap();
            if let Some(address) = line.strip_prefix("worker listening on ") {
                break address.to_string();
            }
        };
        // Keep draining stderr so that the worker never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        workers.children.push(child);
        workers.addresses.push(address);
    }
    workers
}

impl Workers {
    /// `--workers`' value for these workers.
    pub fn list(&self) -> String {
        self.addresses.join(",")
    }

    /// The worker that has used the most CPU time so far: the one doing a query's heavy work.
    pub fn busiest(&mut self) -> usize {
        let running: Vec<usize> = (0..self.children.len())
            .filter(|&i| matches!(self.children[i].try_wait(), Ok(None)))
            .collect();
        running
            .into_iter()
            .max_by_key(|&i| cpu_ticks(self.children[i].id()))
            .expect("a worker still running")
    }

    /// CPU time all the workers still running have used, in clock ticks.
    pub fn cpu_ticks(&mut self) -> u64 {
        self.children
            .iter_mut()
            .filter_map(|child| matches!(child.try_wait(), Ok(None)).then(|| cpu_ticks(child.id())))
            .sum()
    }

    /// An address in front of worker `index` that forwards nothing: the first connection that
    /// sends a byte there (a coordinator's task, not a probe's connect) kills the worker
    /// (`kill -9`), and the address stops accepting connections — a worker that dies as the
    /// first task reaches it.
    pub fn dying_on_first_task(&self, index: usize) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let pid = self.children[index].id();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut first = [0u8; 1];
                // A probe connects and closes: it reads as the end of the stream.
                if matches!(stream.read(&mut first), Ok(1)) {
                    let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
                    // Dropping the listener closes the address.
                    return;
                }
            }
        });
        address
    }

    /// `kill -9` worker `index`: it ends at once, wherever it was.
    pub fn kill(&mut self, index: usize) {
        self.children[index].kill().expect("SIGKILL worker");
        self.children[index].wait().expect("reap worker");
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for child in &mut self.children {
            if matches!(child.try_wait(), Ok(Some(_))) {
                continue;
            }
            let _ = Command::new("kill").arg(child.id().to_string()).status();
            let _ = child.wait();
        }
    }
}

/// `sql`'s physical plan in `ctx`, indented as `EXPLAIN` shows it (a distributed plan starts
/// with `DistributedExec`).
pub async fn physical_plan(ctx: &datafusion::prelude::SessionContext, sql: &str) -> String {
    let plan = ctx
        .sql(sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    datafusion::physical_plan::displayable(plan.as_ref())
        .indent(true)
        .to_string()
}

/// CPU time process `pid` has used (user + system, from /proc), in clock ticks.
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // After the command's `(name)`: state is field 3, utime 14 and stime 15.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// Commits `rows` of `table` (any column types the table's cast to) as a file written without
/// the `missing` columns, as a release before them wrote it; checks the file lacks them. A
/// ledger table's file restates its day.
pub async fn commit_without_columns(
    lake: &gpuledger_lake::Lake,
    data_dir: &Path,
    table: gpuledger_lake::tables::Table,
    rows: &arrow::array::RecordBatch,
    missing: &[&str],
    source: &str,
) {
    let (fields, columns): (Vec<_>, Vec<_>) = table
        .schema()
        .fields()
        .iter()
        .filter(|f| !missing.contains(&f.name().as_str()))
        .map(|f| {
            let column = rows.column_by_name(f.name()).unwrap();
            (
                Arc::clone(f),
                arrow::compute::cast(column, f.data_type()).unwrap(),
            )
        })
        .unzip();
    let schema = Arc::new(arrow::datatypes::Schema::new(fields));
    let old = arrow::array::RecordBatch::try_new(schema, columns).unwrap();
    let batch_id = format!("{table}-without-{}", missing.join("-"));
    let mut writer = gpuledger_lake::writer::TableWriter::new(Arc::clone(lake.store()), &batch_id);
    let files = writer.write(table, &old).await.unwrap();
    for file in &files {
        let path = data_dir.join(file.staged().as_ref());
        let written = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            std::fs::File::open(path).unwrap(),
        )
        .unwrap();
        let columns: Vec<&str> = written
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(columns.len(), table.schema().fields().len() - missing.len());
        assert!(missing.iter().all(|m| !columns.contains(m)), "{columns:?}");
    }
    let batch = gpuledger_lake::catalog::NewBatch {
        batch_id: batch_id.clone(),
        source: source.into(),
        origin: format!("written before {}", missing.join(" and ")),
        content_hash: batch_id,
        idempotency_key: None,
        records_read: old.num_rows() as u64,
        started_at: 0,
    };
    lake.catalog()
        .commit_batch(&batch, &files, &[])
        .await
        .unwrap();
}
