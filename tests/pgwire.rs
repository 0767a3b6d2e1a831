//! `gpuledger serve` over the PostgreSQL wire protocol, driven by the real clients: `psql`
//! (its catalog commands, a ledger query, errors with their SQLSTATE, TLS) and Python's psycopg
//! (parameters over the extended protocol, and the types it reads back), and what clients send
//! besides queries: session statements, settings, cursors.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;

use crate::golden::{load_worked_example, run_ok};
use crate::support::{Ledger, Server, describe, ledgers, psql, psql_sqlstate, psycopg};

/// The worked example's lake (SQLite catalog), a read token and `serve` on it.
fn worked_example_served() -> (Ledger, String, Server) {
    let ledger = ledgers().remove(0);
    load_worked_example(&ledger);
    let reader = ledger.token("read", None);
    let server = ledger.serve(&[]);
    (ledger, reader, server)
}

/// The standard output of `psql` running `commands`, which must succeed.
fn psql_ok(server: &Server, token: &str, commands: &[&str]) -> String {
    let out = psql(server, token, "disable", &[], commands);
    assert!(out.status.success(), "{commands:?}: {}", describe(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// Runs a Python script with psycopg against `server` (the connection string is `sys.argv[1]`);
/// its standard output.
fn psycopg_ok(server: &Server, token: &str, script: &str) -> String {
    let out = psycopg(server, token, script)
        .output()
        .expect("run python3");
    assert!(out.status.success(), "{}", describe(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// The severity and SQLSTATE with which the server ends a start-up whose password is
/// `password`, read off the wire: libpq does not report a SQLSTATE for a failed connection.
fn startup_error(server: &Server, password: &str) -> (String, String) {
    let address = server.postgres.strip_prefix("postgres://").unwrap();
    let mut socket = TcpStream::connect(address).unwrap();
    let mut startup = Vec::new();
    startup.extend(196608u32.to_be_bytes()); // protocol 3.0
    startup.extend(b"user\0analyst\0database\0gpuledger\0\0");
    let mut message = ((startup.len() + 4) as u32).to_be_bytes().to_vec();
    message.extend(startup);
    socket.write_all(&message).unwrap();
    let (kind, body) = read_message(&mut socket);
    assert_eq!(
        (kind, &body[..]),
        (b'R', &3u32.to_be_bytes()[..]),
        "cleartext password asked"
    );
    let mut password_message = vec![b'p'];
    password_message.extend(((password.len() + 5) as u32).to_be_bytes());
    password_message.extend(password.as_bytes());
    password_message.push(0);
    socket.write_all(&password_message).unwrap();
    let (kind, body) = read_message(&mut socket);
    assert_eq!(kind, b'E', "an error response");
    let field = |code: u8| {
        body.split(|b| *b == 0)
            .find(|f| f.first() == Some(&code))
            .map(|f| String::from_utf8_lossy(&f[1..]).to_string())
            .unwrap_or_default()
    };
    (field(b'S'), field(b'C'))
}

fn read_message(socket: &mut TcpStream) -> (u8, Vec<u8>) {
    let mut header = [0u8; 5];
    socket.read_exact(&mut header).unwrap();
    let len = u32::from_be_bytes(header[1..].try_into().unwrap()) as usize;
    let mut body = vec![0u8; len - 4];
    socket.read_exact(&mut body).unwrap();
    (header[0], body)
}

#[test]
fn psql_lists_describes_and_queries_the_ledger() {
    let (_ledger, reader, server) = worked_example_served();

    let tables = psql_ok(&server, &reader, &["\\dt"]);
    for table in ["gpu_hours", "cost_entries", "allocations", "billing_lines"] {
        assert!(
            tables.contains(&format!("public|{table}|table|")),
            "{table} in {tables}"
        );
    }

    let described = psql_ok(&server, &reader, &["\\d gpu_hours"]);
    assert!(
        described.contains("Table \"public.gpu_hours\""),
        "{described}"
    );
    for column in [
        "team|text",
        "busy_seconds|double precision",
        "sm_active|double precision",
    ] {
        assert!(described.contains(column), "{column} in {described}");
    }

    // `\du` sends PostgreSQL's array constructor `ARRAY(SELECT …)`.
    let roles = psql_ok(&server, &reader, &["\\du"]);
    assert!(
        roles.starts_with("List of roles\nRole name|Attributes|Member of\n"),
        "{roles}"
    );

    // `\d+` maps an array's elements (`ARRAY(SELECT … FROM unnest(…))`) and reads pg_class's
    // storage options.
    let detailed = psql_ok(&server, &reader, &["\\d+ cost_entries"]);
    assert!(
        detailed.contains("Table \"public.cost_entries\"")
            && detailed.contains("amount|numeric||not null||main|||")
            && detailed.contains("team|text||||extended|||"),
        "{detailed}"
    );
    // `\dT` sends a correlated scalar subquery that is not aggregated.
    let types = psql_ok(&server, &reader, &["\\dT"]);
    assert!(
        types.starts_with("List of data types\nSchema|Name|Description\n"),
        "{types}"
    );
    // A scalar subquery per row is the row's value (vision held GPU 0 of n1 for 6 hours, nlp GPU 1
    // for 12), and a second row is an error, as in PostgreSQL: never NULL, never the first row.
    let held = psql_ok(
        &server,
        &reader,
        &[
            "select t.team, (select count(*) from gpu_hours h where h.team = t.team) as hours \
           from (select 'nlp' as team union all select 'vision') t order by t.team",
        ],
    );
    assert_eq!(held, "team|hours\nnlp|12\nvision|6\n(2 rows)\n");
    let out = psql(
        &server,
        &reader,
        "disable",
        &[],
        &["select (select team from gpu_hours) as x"],
    );
    assert!(
        !out.status.success()
            && String::from_utf8_lossy(&out.stderr)
                .contains("more than one row returned by a subquery used as an expression"),
        "{}",
        describe(&out)
    );

    let functions = psql_ok(&server, &reader, &["\\df"]);
    for function in [
        "team_costs",
        "idle_summary",
        "time_weighted_avg",
        "interval_overlap_seconds",
        "idle_class",
        "amortize_share",
        "unit_cost",
    ] {
        assert!(
            functions.contains(&format!("|{function}|")),
            "{function} in {functions}"
        );
    }

    // The worked example's team totals (tests/sql/team_costs.slt): vision 6.40 + 3.20 + 13.464,
    // nlp 19.20 + 21.528, unattributed 1.20 + 4.008.
    let totals = psql_ok(
        &server,
        &reader,
        &["select team, round(total_cost, 3) as total from \
           team_costs('2026-11-02', '2026-11-03') order by team"],
    );
    assert_eq!(
        totals,
        "team|total\nnlp|40.728\nunattributed|5.208\nvision|23.064\n(3 rows)\n"
    );

    // Errors carry the SQLSTATE that /v1/sql reports in its problem document.
    assert_eq!(
        psql_sqlstate(&server, &reader, "select * from no_such_table"),
        "42P01"
    );
    assert_eq!(psql_sqlstate(&server, &reader, "selec 1"), "42601");
    assert_eq!(
        psql_sqlstate(&server, &reader, "drop table gpu_hours"),
        "42501"
    );
}

/// SQLAlchemy's psycopg dialect and `pandas.read_sql`, as a notebook uses them: the dialect's
/// start-up (settings, a type lookup with `to_regtype` inside a savepoint), a query into a
/// DataFrame with its column types, a bound parameter, a transaction with a savepoint rolled
/// back to, and the inspector's table names.
#[test]
fn sqlalchemy_and_pandas_read_the_ledger() {
    if std::process::Command::new("python3")
        .args(["-c", "import sqlalchemy, pandas"])
        .status()
        .is_ok_and(|s| !s.success())
    {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have sqlalchemy and pandas (scripts/test installs them)"
        );
        eprintln!("skipped: sqlalchemy or pandas is not installed (scripts/test installs them)");
        return;
    }
    let (_ledger, reader, server) = worked_example_served();
    let script = r#"
import sys
import pandas as pd
from sqlalchemy import create_engine, inspect, text
engine = create_engine(sys.argv[1].replace("postgres://", "postgresql+psycopg://", 1))
# docs/ledger.md's team totals, into a DataFrame.
teams = pd.read_sql("SELECT team, total_cost FROM team_costs('2026-11-02', '2026-11-03') ORDER BY team", engine)
print(list(teams.team), [round(float(c), 3) for c in teams.total_cost])
with engine.connect() as conn:
    hours = pd.read_sql(
        text("SELECT hour, cost FROM gpu_hours WHERE team = :team AND hour >= :since ORDER BY hour"),
        conn, params={"team": "vision", "since": pd.Timestamp("2026-11-02T02:00:00Z")})
    print(str(hours.hour.dtype), len(hours), hours.hour.iloc[0].isoformat())
with engine.connect() as conn, conn.begin():
    point = conn.begin_nested()
    conn.execute(text("SELECT 1"))
    point.rollback()
    print(conn.execute(text("SELECT count(*) FROM cost_entries")).scalar() > 0)
print(sorted(t for t in inspect(engine).get_table_names() if t in ("cost_entries", "gpu_hours")))
# Column reflection binds parameters inside subqueries.
print([(c["name"], str(c["type"]), c["nullable"]) for c in inspect(engine).get_columns("cost_entries")])
with engine.connect() as conn:
    print(conn.execute(text(
        "SELECT count(*) FROM gpu_hours WHERE team = (SELECT CAST(:team AS VARCHAR)) AND gpu_index >= :gpu"),
        {"team": "vision", "gpu": 0}).scalar())
"#;
    let out = psycopg(&server, &reader, script)
        .output()
        .expect("run python3");
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "['nlp', 'unattributed', 'vision'] [40.728, 5.208, 23.064]\n\
         datetime64[ns, UTC] 4 2026-11-02T02:00:00+00:00\n\
         True\n\
         ['cost_entries', 'gpu_hours']\n\
         [('day', 'TIMESTAMP', False), ('team', 'TEXT', True), ('bucket', 'TEXT', False), \
         ('rule', 'TEXT', True), ('source', 'TEXT', False), ('amount', 'NUMERIC', False), \
         ('currency', 'TEXT', True)]\n\
         6\n"
    );
}

/// psycopg binds parameters over the extended protocol (and prepares a named statement when
/// asked) and reads timestamps, floats, decimals, NULLs and text as Python values.
#[test]
fn psycopg_binds_parameters_and_reads_every_type() {
    let (_ledger, reader, server) = worked_example_served();

    let script = r#"
import sys, datetime, decimal, psycopg
with psycopg.connect(sys.argv[1]) as conn:
    with conn.cursor() as cur:
        # nlp's serve job: 2026-11-02 00:00 to 12:00 UTC on n1 GPU 1, 43,200 s (events.jsonl).
        cur.execute(
            "select workload, start_time, end_time, seconds, gpu_index from allocations "
            "where team = %s and start_time >= %s",
            ("nlp", datetime.datetime(2026, 11, 2, tzinfo=datetime.timezone.utc)))
        [(workload, start, end, seconds, gpu)] = cur.fetchall()
        print(repr(workload), start.isoformat(), end.isoformat(), repr(seconds), repr(gpu))
        # billing.csv: the n1 instance line costs 96.00; money is DECIMAL(38,12).
        cur.execute(
            "select charge_description, effective_cost from billing_lines "
            "where effective_cost > %s order by effective_cost", (decimal.Decimal("50"),))
        print(repr(cur.fetchall()))
        # nlp's hours have no telemetry: SM activity is NULL, not 0.
        for team in ["nlp", "vision"]:
            cur.execute(
                "select team, count(*), max(sm_active) is null from gpu_hours where team = %s "
                "group by team", (team,), prepare=True)
            print(repr(cur.fetchall()))
        # A table function's arguments may be parameters too (it is planned once they are
        # bound), prepared or not: vision 6.40 + 3.20 + 13.464.
        for prepare in [False, True]:
            cur.execute("select team, total_cost from team_costs(%s, %s) where team = %s",
                        ("2026-11-02", "2026-11-03", "vision"), prepare=prepare)
            team, total = cur.fetchone()
            print(repr(team), round(total, 3))
        # set_config with bound parameters is kept like a SET; a transaction-local one refused.
        cur.execute("select set_config(%s, %s, false)", ("application_name", "from-psycopg"))
        cur.execute("select current_setting('application_name')")
        print(cur.fetchall())
        try:
            cur.execute("select set_config(%s, %s, true)", ("search_path", "public"))
        except psycopg.errors.FeatureNotSupported as error:
            print(error.sqlstate)
"#;
    let printed = psycopg_ok(&server, &reader, script);
    assert_eq!(
        printed,
        "'serve' 2026-11-02T00:00:00+00:00 2026-11-02T12:00:00+00:00 43200.0 1\n\
         [('p5 instance n1', Decimal('96.000000000000'))]\n\
         [('nlp', 12, True)]\n\
         [('vision', 6, False)]\n\
         'vision' 23.064\n\
         'vision' 23.064\n\
         [('from-psycopg',)]\n\
         0A000\n"
    );
}

#[test]
fn a_team_token_sees_its_rows_only_and_nothing_but_queries_runs() {
    let ledger = ledgers().remove(0);
    load_worked_example(&ledger);
    let admin = ledger.token("admin", None);
    let nlp = ledger.token("read", Some("nlp"));
    let collector = ledger.token("ingest", None);
    let server = ledger.serve(&[]);

    for query in [
        "select distinct team from gpu_hours where team is not null or team is null",
        "select distinct team from allocations union select distinct team from cost_entries \
         where team is not null",
        "select distinct team from team_costs('2026-11-01', '2026-12-01')",
    ] {
        assert_eq!(
            psql_ok(&server, &nlp, &["\\pset tuples_only on", query]),
            "nlp\n",
            "{query}"
        );
        // Read through a cursor, the same query sees the same rows.
        let cursor = format!("DECLARE c CURSOR FOR {query}");
        assert_eq!(
            psql_ok(
                &server,
                &nlp,
                &["\\pset tuples_only on", &cursor, "FETCH ALL FROM c"]
            ),
            "DECLARE CURSOR\nnlp\n",
            "{cursor}"
        );
    }
    // The subquery resolves `gpu_hours` to the same view: vision's hours are not there.
    assert_eq!(
        psql_ok(
            &server,
            &nlp,
            &[
                "\\pset tuples_only on",
                "select count(*) from gpu_hours where hour in \
               (select hour from gpu_hours where team = 'vision')"
            ]
        ),
        "0\n"
    );
    // Tables without teams are not there, not in the catalogs either.
    assert_eq!(
        psql_sqlstate(&server, &nlp, "select * from billing_lines"),
        "42P01"
    );
    assert_eq!(
        psql_ok(
            &server,
            &nlp,
            &[
                "\\pset tuples_only on",
                "select count(*) from information_schema.tables where table_name = 'billing_lines'",
                "select count(*) from pg_catalog.pg_tables where tablename = 'billing_lines'",
                // The columns view (PostgreSQL's type names) reads through the same catalog.
                "select count(*) from information_schema.columns where table_name = 'billing_lines'",
                "select count(*) > 0 from information_schema.columns where table_name = 'gpu_hours'"
            ]
        ),
        "0\n0\n0\nt\n"
    );
    // A team's tables are views of its rows.
    let views = psql_ok(&server, &nlp, &["\\dv"]);
    assert!(views.contains("public|gpu_hours|view|"), "{views}");
    assert!(!views.contains("billing_lines"), "{views}");

    // Only queries, for every token; nothing touches a file.
    for query in [
        "create table copied as select * from gpu_hours",
        "insert into gpu_hours (team) values ('nlp')",
        "drop table gpu_hours",
        "CREATE EXTERNAL TABLE pw (line varchar) STORED AS CSV LOCATION '/etc/passwd'",
        "COPY (select * from gpu_hours) TO '/tmp/gpuledger-pg-leak.csv' STORED AS CSV",
        "SET datafusion.execution.target_partitions = 1",
    ] {
        assert_eq!(psql_sqlstate(&server, &admin, query), "42501", "{query}");
    }
    assert!(!Path::new("/tmp/gpuledger-pg-leak.csv").exists());
    assert_eq!(
        psql_sqlstate(&server, &admin, "select * from '/etc/passwd'"),
        "42P01"
    );

    // The same refusal over the extended protocol, at Parse.
    let printed = psycopg_ok(
        &server,
        &admin,
        r#"
import sys, psycopg
with psycopg.connect(sys.argv[1]) as conn:
    for query, parameters in [
            ("create table copied as select * from gpu_hours where team = %s", ("nlp",)),
            ("create table copied as select * from team_costs(%s, %s)", ("2026-11-02", "2026-11-03")),
            ("CREATE EXTERNAL TABLE pw (line varchar) STORED AS CSV LOCATION '/etc/passwd'", None)]:
        try:
            conn.execute(query, parameters)
        except psycopg.Error as error:
            print(error.sqlstate)
            conn.rollback()
"#,
    );
    assert_eq!(printed, "42501\n42501\n42501\n");

    // A wrong token, and a token that may not query.
    assert_eq!(
        startup_error(&server, "glt_0000_nonsense"),
        ("FATAL".to_string(), "28P01".to_string())
    );
    assert_eq!(startup_error(&server, &collector).1, "42501");
}

#[test]
fn psql_connects_over_tls_with_sslmode_require() {
    let ledger = ledgers().remove(0);
    load_worked_example(&ledger);
    let reader = ledger.token("read", None);
    let dir = ledger.dir.path();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let made = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=localhost", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("run openssl");
    assert!(made.status.success(), "{}", describe(&made));
    let server = ledger.serve(&[
        "--pg-tls-cert",
        cert.to_str().unwrap(),
        "--pg-tls-key",
        key.to_str().unwrap(),
    ]);

    let out = psql(
        &server,
        &reader,
        "require",
        &[],
        &["\\conninfo", "select count(*) as n from allocations"],
    );
    assert!(out.status.success(), "{}", describe(&out));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains("SSL connection (protocol: TLSv1."),
        "{stdout}"
    );
    assert!(stdout.ends_with("n\n3\n(1 row)\n"), "{stdout}");
}

/// Ledger money is exact decimals, so sums of it do not depend on the order they add in. Team a
/// holds 8 GPUs at 3.80 for 20 hours (160 GPU-hours → 608.00), team b 8 at 2.85 (→ 456.00):
/// as floats, the 160 hourly amounts add up to 607.9999999999999 and 456.00000000000125.
#[test]
fn team_totals_read_back_over_the_postgres_port_as_exact_decimals() {
    let ledger = ledgers().remove(0);
    let dir = ledger.dir.path();
    let objects = dir.join("fleet.yaml");
    std::fs::write(
        &objects,
        "kind: node\nspec: {cluster: town, node: a1, gpu_count: 8, gpu_model: NVIDIA A100, capacity_type: on_demand}\n\
         ---\nkind: node\nspec: {cluster: town, node: b1, gpu_count: 8, gpu_model: NVIDIA L4, capacity_type: on_demand}\n\
         ---\nkind: rate_card\nspec: {gpu_model: NVIDIA A100, capacity_type: on_demand, price_per_gpu_hour: 3.80}\n\
         ---\nkind: rate_card\nspec: {gpu_model: NVIDIA L4, capacity_type: on_demand, price_per_gpu_hour: 2.85}\n",
    )
    .unwrap();
    let event = |time: &str, event: &str, node: &str, team: &str, extra: &str| {
        format!(
            "{{\"ts\":\"2026-11-02T{time}Z\",\"event\":\"{event}\",\"cluster\":\"town\",\"node\":\"{node}\",\
             \"namespace\":\"{team}\",\"workload\":\"train\",\"pod\":\"train-0\",{extra}\
             \"labels\":{{\"team\":\"{team}\"}}}}\n"
        )
    };
    let all_gpus = "\"gpus\":8,\"gpu_indices\":[0,1,2,3,4,5,6,7],";
    let events = dir.join("events.jsonl");
    std::fs::write(
        &events,
        [
            event("00:00:00", "start", "a1", "a", all_gpus),
            event("00:00:00", "start", "b1", "b", all_gpus),
            event("20:00:00", "stop", "a1", "a", "\"reason\":\"finished\","),
            event("20:00:00", "stop", "b1", "b", "\"reason\":\"finished\","),
        ]
        .concat(),
    )
    .unwrap();
    run_ok(&ledger, &["apply", objects.to_str().unwrap()]);
    run_ok(&ledger, &["ingest", "events", events.to_str().unwrap()]);
    run_ok(
        &ledger,
        &[
            "ledger",
            "build",
            "--from",
            "2026-11-02",
            "--to",
            "2026-11-02",
        ],
    );
    let reader = ledger.token("read", None);
    let server = ledger.serve(&[]);

    let printed = psql_ok(
        &server,
        &reader,
        &[
            "select team, sum(amount) from cost_entries where team is not null group by team order by team",
            "select team, sum(cost) from gpu_hours where team is not null group by team order by team",
            "select team, total_cost from team_costs('2026-11-02', '2026-11-03') order by team",
        ],
    );
    let table =
        |column: &str| format!("team|{column}\na|608.000000000000\nb|456.000000000000\n(2 rows)\n");
    assert_eq!(
        printed,
        [
            table("sum(cost_entries.amount)"),
            table("sum(gpu_hours.cost)"),
            table("total_cost")
        ]
        .concat()
    );
    // psycopg reads NUMERIC as Python's Decimal: exact, not a float.
    let script = r#"
import sys, psycopg
with psycopg.connect(sys.argv[1]) as conn:
    rows = conn.execute("select team, sum(amount) from cost_entries where team is not null group by team order by team").fetchall()
    print(repr(rows))
"#;
    assert_eq!(
        psycopg_ok(&server, &reader, script),
        "[('a', Decimal('608.000000000000')), ('b', Decimal('456.000000000000'))]\n"
    );
}

/// What PostgreSQL clients send besides queries (issue 20): session statements, settings,
/// the user registers, introspection functions, PostgreSQL's `to_char`, cursors and
/// savepoints, over psql.
#[test]
fn psql_gets_postgres_answers_to_what_clients_send() {
    let (_ledger, reader, server) = worked_example_served();
    let out = psql_ok(
        &server,
        &reader,
        &[
            "DEALLOCATE ALL",
            "DISCARD ALL",
            "select current_setting('server_version') as v, current_setting('server_version_num') as n, \
             current_setting('default_transaction_read_only') as ro, current_setting('no.such', true) is null as missing",
            "show server_version",
            "select version() like 'PostgreSQL 16.6 on gpuledger %' as postgres",
            "select current_user as cu, session_user, user",
            "select pg_is_in_recovery() as standby, obj_description(1259, 'pg_class') is null as no_comment, \
             col_description(1259, 1) is null as no_column_comment",
            // The worked example's first GPU-hour is 2026-11-02 00:00 UTC, a Monday of ISO week 45.
            "select to_char(min(hour), 'YYYY-MM-DD HH24:MI') as pg, to_char(min(hour), 'FMDay \"week\" IW') as words, \
             to_char(min(hour), '%Y/%m/%d') as chrono from gpu_hours",
            // information_schema.columns names PostgreSQL's types and counts columns from 1,
            // under any alias.
            "select c.column_name, c.ordinal_position, c.data_type from information_schema.columns c \
             where c.table_name = 'cost_entries' and c.column_name in ('day', 'team', 'amount') \
             order by c.ordinal_position",
            // set_config keeps a setting for the connection, as SET does (pg_dump sends it).
            "select set_config('application_name', 'ledger-notebook', false)",
            "select current_setting('application_name') as now_named",
            "show application_name",
            "BEGIN",
            // nlp 12 GPU-hour rows, unattributed 1, vision 6, and 31 with no team (idle).
            "DECLARE hours CURSOR FOR select team, count(*) as n from gpu_hours group by team order by team",
            "FETCH 1 FROM hours",
            "FETCH ALL FROM hours",
            "FETCH NEXT FROM hours",
            "CLOSE hours",
            // Drivers' savepoints: nothing to undo in a session that only reads.
            "SAVEPOINT before_lookup",
            "select to_regtype('integer') = to_regtype('int4') as same, \
             to_regtype('timestamptz') is not null as tz, to_regtype('hstore') is null as no_hstore",
            // date_trunc(text, timestamp with time zone) is pg_proc's oid 1217, as in PostgreSQL.
            "select pg_get_function_arguments(1217) as arguments, pg_get_function_result(1217) as result",
            "ROLLBACK TO SAVEPOINT before_lookup",
            "RELEASE SAVEPOINT before_lookup",
            "COMMIT",
        ],
    );
    assert_eq!(
        out,
        "DEALLOCATE ALL\n\
         DISCARD ALL\n\
         v|n|ro|missing\n16.6|160006|on|t\n(1 row)\n\
         server_version\n16.6\n(1 row)\n\
         postgres\nt\n(1 row)\n\
         cu|session_user|user\nanalyst|analyst|analyst\n(1 row)\n\
         standby|no_comment|no_column_comment\nf|t|t\n(1 row)\n\
         pg|words|chrono\n2026-11-02 00:00|Monday week 45|2026/11/02\n(1 row)\n\
         column_name|ordinal_position|data_type\nday|1|timestamp with time zone\nteam|2|text\n\
         amount|6|numeric\n(3 rows)\n\
         set_config\nledger-notebook\n(1 row)\n\
         now_named\nledger-notebook\n(1 row)\n\
         application_name\nledger-notebook\n(1 row)\n\
         BEGIN\n\
         DECLARE CURSOR\n\
         team|n\nnlp|12\n(1 row)\n\
         team|n\nunattributed|1\nvision|6\n|31\n(3 rows)\n\
         team|n\n(0 rows)\n\
         CLOSE CURSOR\n\
         SAVEPOINT\n\
         same|tz|no_hstore\nt|t|t\n(1 row)\n\
         arguments|result\ntext, timestamp with time zone|timestamp with time zone\n(1 row)\n\
         ROLLBACK\n\
         RELEASE\n\
         COMMIT\n"
    );
    assert_eq!(
        psql_sqlstate(&server, &reader, "select current_setting('shared_buffers')"),
        "42704"
    );
    assert_eq!(
        psql_sqlstate(&server, &reader, "FETCH 1 FROM nowhere"),
        "34000"
    );
    // A transaction-local setting would be a wrong answer once the transaction ends: refused.
    assert_eq!(
        psql_sqlstate(
            &server,
            &reader,
            "select set_config('search_path', 'public', true)"
        ),
        "0A000"
    );
    // A cursor's query is refused like any other that writes, and limited like any other.
    assert_eq!(
        psql_sqlstate(
            &server,
            &reader,
            "DECLARE c CURSOR FOR select * from generate_series(1, 100000000) a cross join generate_series(1, 100) b"
        ),
        "54000"
    );
}

/// psycopg's named (server-side) cursors with parameters, and the statement-cache clean-up it
/// and connection pools send.
#[test]
fn psycopg_reads_through_a_named_cursor() {
    let (ledger, reader, server) = worked_example_served();
    let script = r#"
import sys, psycopg
with psycopg.connect(sys.argv[1]) as conn:
    direct = conn.execute(
        "select team, workload, seconds from allocations order by team, start_time, workload").fetchall()
    with conn.cursor(name="allocations") as cur:
        cur.execute("select team, workload, seconds from allocations order by team, start_time, workload")
        first = cur.fetchmany(2)
        rest = cur.fetchall()
        print(len(direct), first + rest == direct, [d.name for d in cur.description])
    with conn.cursor(name="vision") as cur:
        cur.execute("select count(*) from gpu_hours where team = %s", ("vision",))
        print(cur.fetchone())
    conn.execute("DEALLOCATE ALL")
    conn.execute("DISCARD ALL")
    # Prepared again after the clean-up, under the names psycopg reuses.
    for team in ["nlp", "vision"]:
        print(conn.execute("select count(*) from gpu_hours where team = %s", (team,), prepare=True).fetchone())
    # Each open cursor keeps its rows: a connection holds a few at once.
    declared = 0
    try:
        for i in range(5):
            conn.execute(f"DECLARE c{i} CURSOR FOR select 1")
            declared += 1
    except psycopg.Error as e:
        print(declared, e.diag.sqlstate)
        conn.rollback()
"#;
    let printed = psycopg_ok(&server, &reader, script);
    let rows = ledger.scalar("select count(*) from allocations");
    assert_eq!(
        printed,
        format!("{rows} True ['team', 'workload', 'seconds']\n(6,)\n(12,)\n(6,)\n4 54000\n")
    );
}

/// Counts a client writes are answered, never used to size memory: a `FETCH` of 10^11 or
/// 2^64 - 1 rows reads the cursor in pieces, and a `$n` past the protocol's 65,535 parameters
/// is refused at Parse. pgwire reserved room for the whole count, and the parameter types were
/// a vector of `n`: either aborted the server.
#[test]
fn fetch_counts_and_placeholder_numbers_do_not_size_memory() {
    let (_ledger, reader, server) = worked_example_served();
    let script = r#"
import sys, psycopg
with psycopg.connect(sys.argv[1]) as conn:
    conn.execute("DECLARE big CURSOR FOR select * from generate_series(1, 20000) g")
    rows = conn.execute("FETCH 100000000000 FROM big").fetchall()
    print(len(rows), rows[0][0], rows[-1][0])
    conn.execute("DECLARE few CURSOR FOR select * from generate_series(1, 3) g")
    print(conn.execute("FETCH 18446744073709551615 FROM few").fetchall())
    # 9,000 rows cross a piece of 8,192; the cursor goes on from the 9,001st.
    conn.execute("DECLARE part CURSOR FOR select * from generate_series(1, 10000) g")
    part = conn.execute("FETCH 9000 FROM part").fetchall()
    rest = conn.execute("FETCH ALL FROM part").fetchall()
    print(len(part), part[-1][0], len(rest), rest[0][0])
    # Exactly a piece: the cursor ends on the next FETCH, and stays ended with its columns.
    conn.execute("DECLARE exact CURSOR FOR select * from generate_series(1, 8192) g")
    exact = conn.execute("FETCH 8192 FROM exact").fetchall()
    after = conn.execute("FETCH 1 FROM exact")
    print(len(exact), after.fetchall(), conn.execute("FETCH 5 FROM exact").fetchall(),
          [d.name for d in after.description])
    try:
        conn.execute("select %s::bigint + $99999999999", (1,))
    except psycopg.Error as e:
        print(e.diag.sqlstate, e.diag.message_primary)
        conn.rollback()
    print(conn.execute("select %s::bigint + 1", (1,)).fetchone())
"#;
    assert_eq!(
        psycopg_ok(&server, &reader, script),
        "20000 1 20000\n\
         [(1,), (2,), (3,)]\n\
         9000 9000 1000 9001\n\
         8192 [] [] ['value']\n\
         22023 there is no parameter $99999999999: a statement takes at most 65535\n\
         (2,)\n"
    );
}

/// Cursor rows wait in the server's memory: each connection holds at most 4 cursors, and the
/// whole server at most 4 × `--query-max-result-mb` of their rows, however many connect.
#[test]
fn cursors_hold_a_bounded_amount_of_rows_server_wide() {
    let ledger = ledgers().remove(0);
    let reader = ledger.token("read", None);
    let server = ledger.serve(&["--query-max-result-mb", "1"]);
    // 120,000 BIGINTs: 15 batches of at most 8,192 × 8 bytes, 0.94 MiB, under the 1 MiB a query
    // may answer; four of them fit the server's 4 MiB of cursor rows, five do not.
    let script = r#"
import sys, time, psycopg
series = "select value from generate_series(1, 120000)"
a = psycopg.connect(sys.argv[1], autocommit=True)
b = psycopg.connect(sys.argv[1], autocommit=True)
for i in range(4):
    a.execute(f"DECLARE a{i} CURSOR FOR {series}")
try:
    b.execute(f"DECLARE b0 CURSOR FOR {series}")
    print("declared past the limit")
except psycopg.Error as e:
    print(e.diag.sqlstate)
a.execute("CLOSE a0")
b.execute(f"DECLARE b0 CURSOR FOR {series}")
print(len(b.execute("FETCH ALL FROM b0").fetchall()))
# A connection that ends gives its cursors' rows back.
a.close()
for i in range(1, 4):
    for attempt in range(50):
        try:
            b.execute(f"DECLARE b{i} CURSOR FOR {series}")
            break
        except psycopg.Error:
            time.sleep(0.1)
print(sum(len(b.execute(f"FETCH ALL FROM b{i}").fetchall()) for i in range(1, 4)))
"#;
    assert_eq!(
        psycopg_ok(&server, &reader, script),
        "53200\n120000\n360000\n"
    );
}

/// pgJDBC, the driver DBeaver and Metabase use (Debian's `libpostgresql-jdbc-java`): the
/// metadata calls those tools make, a prepared statement with a timestamp, and a fetch size.
#[test]
fn pgjdbc_reads_metadata_and_binds_a_timestamp() {
    let jar = Path::new("/usr/share/java/postgresql.jar");
    if !jar.exists() {
        eprintln!("skipped: pgJDBC is not installed ({})", jar.display());
        return;
    }
    let (_ledger, reader, server) = worked_example_served();
    let classes = tempfile::tempdir().unwrap();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/jdbc/PgClient.java");
    let compiled = Command::new("javac")
        .arg("-cp")
        .arg(jar)
        .arg("-d")
        .arg(classes.path())
        .arg(&source)
        .output()
        .expect("javac");
    assert!(compiled.status.success(), "{}", describe(&compiled));
    let url = format!(
        "jdbc:{}/gpuledger?sslmode=disable",
        server.postgres.replacen("postgres://", "postgresql://", 1)
    );
    let out = Command::new("java")
        .arg("-Duser.timezone=UTC")
        .arg("-cp")
        .arg(format!("{}:{}", jar.display(), classes.path().display()))
        .args(["PgClient", &url, &reader])
        .output()
        .expect("java");
    assert!(out.status.success(), "{}", describe(&out));
    // vision held n1's GPU 0 from 00:00 to 06:00 (worked-example/events.jsonl): 4 of its
    // GPU-hour rows are from 02:00 on; nlp's 12 rows are read two at a time.
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "product PostgreSQL 16.6\n\
         tables gpu_hours gpu_samples gpu_samples_extra\n\
         columns hour:timestamptz cluster:text node:text\n\
         functions true\n\
         prepared 4\n\
         fetched 12\n\
         fetched all 20000 summing 200010000\n"
    );
}
