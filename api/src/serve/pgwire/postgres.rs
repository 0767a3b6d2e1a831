//! PostgreSQL's own session surface, answered as PostgreSQL answers it, for what
//! datafusion-postgres leaves out:
//!
//! - the settings clients read: `current_setting(name [, missing_ok])` and `SHOW name`, from the
//!   connection (what the client set at start-up or with `SET`) and the server's constants, one
//!   table for both, so that `server_version` says 16.6 everywhere;
//! - the special registers `current_user`, `session_user`, `user` and `current_role`: the name
//!   the client logged in with;
//! - `DEALLOCATE` and `DISCARD`, which connection pools and psycopg send to clean up the
//!   client's prepared statements and portals (nothing else of a session is kept);
//! - `SAVEPOINT`, `RELEASE` and `ROLLBACK TO`, which drivers send inside their transactions
//!   (a read-only session has nothing to undo), and `SELECT set_config(name, value, false)`,
//!   kept like a `SET`;
//! - functions clients call while looking around: `version()`, `pg_is_in_recovery()` (false:
//!   there is no standby), `obj_description`, `col_description` and `shobj_description` (NULL:
//!   no object has a comment), `pg_get_function_result(oid)`, `pg_get_function_arguments(oid)`
//!   and `pg_function_is_visible(oid)` over `pg_proc` (pgJDBC's `getFunctions` asks for both), `to_regtype(name)` over `pg_type`
//!   (psycopg's type lookups, SQLAlchemy's start-up).

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::error::DataFusionError;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::ast::{
    self, DiscardObject, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, Query,
    SelectItem, SetExpr, Statement, Value, VisitMut, VisitorMut,
};
use datafusion_postgres::arrow_pg::datatypes::arrow_schema_to_pg_fields;
use datafusion_postgres::arrow_pg::datatypes::df::encode_dataframe;
use datafusion_postgres::pgwire;
use gpuledger_query::QueryError;
use pgwire::api::portal::Format;
use pgwire::api::results::{FieldInfo, Response, Tag};
use pgwire::api::store::PortalStore;
use pgwire::error::PgWireResult;

use super::pg_error;

/// The PostgreSQL version the server speaks for: the protocol, `pg_catalog` and the functions
/// clients look for are 16's.
pub const SERVER_VERSION: &str = "16.6";
const SERVER_VERSION_NUM: &str = "160006";

/// A setting as `current_setting` and `SHOW` give it; `None` when PostgreSQL has no such setting.
/// `client` holds what the client sent at start-up and set since (keys as sent).
pub fn setting(name: &str, client: &HashMap<String, String>) -> Option<String> {
    let from_client = |key: &str, default: &str| {
        client
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map_or_else(|| default.to_string(), |(_, v)| v.clone())
    };
    Some(match name.to_ascii_lowercase().as_str() {
        "server_version" => SERVER_VERSION.into(),
        "server_version_num" => SERVER_VERSION_NUM.into(),
        "server_encoding" => "UTF8".into(),
        "client_encoding" => from_client("client_encoding", "UTF8"),
        "datestyle" => from_client("datestyle", "ISO, MDY"),
        "intervalstyle" => from_client("intervalstyle", "postgres"),
        "timezone" => from_client("timezone", "UTC"),
        "application_name" => from_client("application_name", ""),
        "search_path" => from_client("search_path", "\"$user\", public"),
        "extra_float_digits" => from_client("extra_float_digits", "1"),
        "bytea_output" => from_client("bytea_output", "hex"),
        "lc_messages" => from_client("lc_messages", "C"),
        "session_authorization" => from_client(pgwire::api::METADATA_USER, ""),
        "integer_datetimes" | "standard_conforming_strings" => "on".into(),
        // Every transaction only reads.
        "default_transaction_read_only" | "transaction_read_only" => "on".into(),
        "is_superuser" => "off".into(),
        // Each statement sees the catalog as committed when it starts.
        "transaction_isolation" | "default_transaction_isolation" => "read committed".into(),
        "max_identifier_length" => "63".into(),
        _ => return None,
    })
}

/// The functions of this module, for a connection's session.
pub fn register_functions(ctx: &SessionContext) {
    let version = format!(
        "PostgreSQL {SERVER_VERSION} on gpuledger {} (Apache DataFusion {})",
        env!("CARGO_PKG_VERSION"),
        datafusion::DATAFUSION_VERSION
    );
    let text = |value: Option<String>| ScalarValue::Utf8(value);
    for (name, arities, value) in [
        ("version", vec![0], text(Some(version))),
        (
            "pg_is_in_recovery",
            vec![0],
            ScalarValue::Boolean(Some(false)),
        ),
        ("obj_description", vec![1, 2], text(None)),
        // Every type of pg_type lives in pg_catalog, which is always on the search path.
        (
            "pg_type_is_visible",
            vec![1],
            ScalarValue::Boolean(Some(true)),
        ),
        ("col_description", vec![2], text(None)),
        ("shobj_description", vec![2], text(None)),
    ] {
        ctx.register_udf(ScalarUDF::new_from_impl(Constant::new(
            name, &arities, value,
        )));
    }
    ctx.register_udaf(datafusion::logical_expr::AggregateUDF::new_from_impl(
        SubqueryValue {
            signature: Signature::any(1, Volatility::Immutable),
        },
    ));
}

/// The value of a scalar subquery's one row, as PostgreSQL gives it: NULL over no rows, and an
/// error over more than one ("more than one row returned by a subquery used as an expression").
/// DataFusion plans a correlated scalar subquery only when it aggregates: [`Rewriter`] wraps the
/// subqueries that do not (psql's `\dT` sends one) in this aggregate, which changes no answer.
#[derive(Debug, PartialEq, Eq, Hash)]
struct SubqueryValue {
    signature: Signature,
}

impl SubqueryValue {
    const NAME: &'static str = "pg_subquery_value";
}

impl datafusion::logical_expr::AggregateUDFImpl for SubqueryValue {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(arg_types[0].clone())
    }

    fn state_fields(
        &self,
        args: datafusion::logical_expr::function::StateFieldsArgs,
    ) -> DfResult<Vec<datafusion::arrow::datatypes::FieldRef>> {
        Ok(vec![
            Arc::new(Field::new("rows", DataType::UInt64, false)),
            Arc::new(Field::new("value", args.return_type().clone(), true)),
        ])
    }

    fn accumulator(
        &self,
        args: datafusion::logical_expr::function::AccumulatorArgs,
    ) -> DfResult<Box<dyn datafusion::logical_expr::Accumulator>> {
        Ok(Box::new(OneRow {
            rows: 0,
            value: ScalarValue::try_from(args.return_field.data_type())?,
        }))
    }
}

#[derive(Debug)]
struct OneRow {
    rows: u64,
    value: ScalarValue,
}

impl OneRow {
    fn add(&mut self, rows: u64, value: impl FnOnce() -> DfResult<ScalarValue>) -> DfResult<()> {
        if rows == 0 {
            return Ok(());
        }
        self.rows += rows;
        if self.rows > 1 {
            return Err(DataFusionError::Execution(
                "more than one row returned by a subquery used as an expression".into(),
            ));
        }
        self.value = value()?;
        Ok(())
    }
}

impl datafusion::logical_expr::Accumulator for OneRow {
    fn update_batch(&mut self, values: &[datafusion::arrow::array::ArrayRef]) -> DfResult<()> {
        let values = &values[0];
        self.add(values.len() as u64, || {
            ScalarValue::try_from_array(values, 0)
        })
    }

    fn merge_batch(&mut self, states: &[datafusion::arrow::array::ArrayRef]) -> DfResult<()> {
        let rows = states[0].as_primitive::<datafusion::arrow::datatypes::UInt64Type>();
        for i in 0..rows.len() {
            self.add(rows.value(i), || ScalarValue::try_from_array(&states[1], i))?;
        }
        Ok(())
    }

    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        Ok(vec![
            ScalarValue::UInt64(Some(self.rows)),
            self.value.clone(),
        ])
    }

    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        Ok(self.value.clone())
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.value.size()
    }
}

/// `pg_get_function_result(oid)`, `pg_get_function_arguments(oid)` and
/// `pg_function_is_visible(oid)` for the functions of `pg_catalog.pg_proc`, and
/// `to_regtype(name)` for the types of `pg_catalog.pg_type` (the same for every session: read
/// once).
pub async fn register_catalog_functions(ctx: &SessionContext) -> Result<(), QueryError> {
    static FUNCTIONS: tokio::sync::OnceCell<Arc<HashMap<String, String>>> =
        tokio::sync::OnceCell::const_new();
    static ARGUMENTS: tokio::sync::OnceCell<Arc<HashMap<String, String>>> =
        tokio::sync::OnceCell::const_new();
    static TYPES: tokio::sync::OnceCell<Arc<HashMap<String, String>>> =
        tokio::sync::OnceCell::const_new();
    let functions = FUNCTIONS
        .get_or_try_init(|| {
            catalog_map(
                ctx,
                "SELECT CAST(p.oid AS VARCHAR), \
                 CASE WHEN p.proretset THEN 'SETOF ' ELSE '' END \
                 || CAST(format_type(p.prorettype, NULL) AS VARCHAR) FROM pg_catalog.pg_proc p",
            )
        })
        .await?;
    // A type by its name and by the name format_type gives it (`int4` and `integer`).
    let types = TYPES
        .get_or_try_init(|| {
            catalog_map(
                ctx,
                "SELECT CAST(t.typname AS VARCHAR), CAST(t.oid AS VARCHAR) FROM pg_catalog.pg_type t \
                 UNION ALL SELECT CAST(format_type(t.oid, NULL) AS VARCHAR), CAST(t.oid AS VARCHAR) \
                 FROM pg_catalog.pg_type t",
            )
        })
        .await?;
    // A function's argument types by name, from its `proargtypes` (type oids, space-separated).
    let arguments = ARGUMENTS
        .get_or_try_init(|| async {
            let names = catalog_map(
                ctx,
                "SELECT CAST(t.oid AS VARCHAR), CAST(format_type(t.oid, NULL) AS VARCHAR) \
                 FROM pg_catalog.pg_type t",
            )
            .await?;
            let argument_types = catalog_map(
                ctx,
                "SELECT CAST(p.oid AS VARCHAR), CAST(p.proargtypes AS VARCHAR) \
                 FROM pg_catalog.pg_proc p",
            )
            .await?;
            let arguments = argument_types
                .iter()
                .map(|(function, types)| {
                    let named: Vec<&str> = types
                        .split_whitespace()
                        .map(|oid| names.get(oid).map_or(oid, String::as_str))
                        .collect();
                    (function.clone(), named.join(", "))
                })
                .collect();
            Ok::<_, QueryError>(Arc::new(arguments))
        })
        .await?;
    let text = |value: &str| ScalarValue::Utf8(Some(value.to_string()));
    ctx.register_udf(ScalarUDF::new_from_impl(Lookup {
        name: "pg_get_function_result",
        entries: Arc::clone(functions),
        answer: text,
        missing: ScalarValue::Utf8(None),
    }));
    ctx.register_udf(ScalarUDF::new_from_impl(Lookup {
        name: "pg_get_function_arguments",
        entries: Arc::clone(arguments),
        answer: text,
        missing: ScalarValue::Utf8(None),
    }));
    ctx.register_udf(ScalarUDF::new_from_impl(Lookup {
        name: "pg_function_is_visible",
        entries: Arc::clone(functions),
        // Every function of pg_proc is in pg_catalog, which is on every search path.
        answer: |_| ScalarValue::Boolean(Some(true)),
        missing: ScalarValue::Boolean(None),
    }));
    ctx.register_udf(ScalarUDF::new_from_impl(Lookup {
        name: "to_regtype",
        entries: Arc::clone(types),
        // The type's oid (PostgreSQL's regtype is an oid), NULL for no such type.
        answer: |oid| ScalarValue::Int64(oid.parse().ok()),
        missing: ScalarValue::Int64(None),
    }));
    Ok(())
}

/// The first two columns of `sql`, text, as a map (the first value of a key wins).
async fn catalog_map(
    ctx: &SessionContext,
    sql: &str,
) -> Result<Arc<HashMap<String, String>>, QueryError> {
    let mut map = HashMap::new();
    for batch in ctx.sql(sql).await?.collect().await? {
        let keys = arrow::compute::cast(batch.column(0), &DataType::Utf8)
            .map_err(DataFusionError::from)?;
        let values = arrow::compute::cast(batch.column(1), &DataType::Utf8)
            .map_err(DataFusionError::from)?;
        let (keys, values) = (keys.as_string::<i32>(), values.as_string::<i32>());
        for row in 0..batch.num_rows() {
            if keys.is_valid(row) && values.is_valid(row) {
                map.entry(keys.value(row).to_string())
                    .or_insert_with(|| values.value(row).to_string());
            }
        }
    }
    Ok(Arc::new(map))
}

/// A function of one argument answered from a catalog map: the argument as text (an oid's
/// digits, a type's name; names fold to lower case as PostgreSQL folds unquoted ones).
#[derive(Debug)]
struct Lookup {
    name: &'static str,
    entries: Arc<HashMap<String, String>>,
    answer: fn(&str) -> ScalarValue,
    missing: ScalarValue,
}

impl PartialEq for Lookup {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for Lookup {}

impl std::hash::Hash for Lookup {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

static ONE_ARGUMENT: std::sync::LazyLock<Signature> =
    std::sync::LazyLock::new(|| Signature::any(1, Volatility::Stable));

impl ScalarUDFImpl for Lookup {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &ONE_ARGUMENT
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(self.missing.data_type())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let keys = args.args[0].to_array(args.number_rows)?;
        let keys = arrow::compute::cast(&keys, &DataType::Utf8)?;
        let values = keys
            .as_string::<i32>()
            .iter()
            .map(|key| {
                key.and_then(|key| self.entries.get(key.trim().to_lowercase().as_str()))
                    .map_or_else(|| self.missing.clone(), |found| (self.answer)(found))
            })
            .collect::<Vec<_>>();
        let array = ScalarValue::iter_to_array(values)?;
        Ok(match &args.args[0] {
            ColumnarValue::Scalar(_) => {
                ColumnarValue::Scalar(ScalarValue::try_from_array(&array, 0)?)
            }
            ColumnarValue::Array(_) => ColumnarValue::Array(array),
        })
    }
}

/// A function whose answer is the same for any arguments.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Constant {
    name: &'static str,
    signature: Signature,
    value: ScalarValue,
}

impl Constant {
    fn new(name: &'static str, arities: &[usize], value: ScalarValue) -> Self {
        let forms = arities
            .iter()
            .map(|&n| {
                if n == 0 {
                    TypeSignature::Nullary
                } else {
                    TypeSignature::Any(n)
                }
            })
            .collect();
        Self {
            name,
            signature: Signature::one_of(forms, Volatility::Stable),
            value,
        }
    }
}

impl ScalarUDFImpl for Constant {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(self.value.data_type())
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        Ok(ColumnarValue::Scalar(self.value.clone()))
    }
}

/// The statement text with every scalar subquery that stands alone in a select list put in
/// parentheses, for datafusion-postgres's parser: its `RemoveSubqueryFromProjection` rule
/// replaces such a subquery with NULL when it is correlated and adds `LIMIT 1` when it is not —
/// wrong answers both over the ledger's tables, where PostgreSQL gives the row's value or fails
/// on a second row. In parentheses the rule leaves it alone and [`Rewriter`] gives it
/// PostgreSQL's meaning ([`SubqueryValue`]).
///
/// Statements that read the system catalogs (`pg_*`, `information_schema`) keep the rule: the
/// subqueries clients send there look up column defaults, collations and identities, which this
/// catalog does not have (NULL is the answer), in shapes DataFusion cannot decorrelate. Text
/// without such a subquery (or that does not parse) is returned as it came, so that the parser's
/// whole-statement substitutions still recognise it.
pub fn protect_scalar_subqueries(sql: &str) -> std::borrow::Cow<'_, str> {
    struct Protect {
        changed: bool,
    }
    impl VisitorMut for Protect {
        type Break = ();
        fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
            if let SetExpr::Select(select) = query.body.as_mut() {
                for item in &mut select.projection {
                    if let SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } =
                        item
                        && matches!(expr, Expr::Subquery(_))
                    {
                        *expr = Expr::Nested(Box::new(expr.clone()));
                        self.changed = true;
                    }
                }
            }
            ControlFlow::Continue(())
        }
    }
    let Ok(mut statements) = datafusion::sql::sqlparser::parser::Parser::parse_sql(
        &datafusion::sql::sqlparser::dialect::PostgreSqlDialect {},
        sql,
    ) else {
        return sql.into();
    };
    let mut reads_catalog = false;
    let _ = ast::visit_relations(&statements, |name| {
        let first = name.0.first().and_then(|part| part.as_ident());
        reads_catalog |= first.is_some_and(|first| {
            let first = first.value.to_lowercase();
            first == "pg_catalog" || first == "information_schema" || first.starts_with("pg_")
        });
        ControlFlow::<()>::Continue(())
    });
    if reads_catalog {
        return sql.into();
    }
    let mut protect = Protect { changed: false };
    for statement in &mut statements {
        let _ = statement.visit(&mut protect);
    }
    if !protect.changed {
        return sql.into();
    }
    statements
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(";\n")
        .into()
}

/// Rewrites what the connection answers itself: `current_setting(…)` and the user registers
/// become literals (a bare call in a select list keeps PostgreSQL's column name), and
/// `information_schema.columns` reads with PostgreSQL's type names.
pub fn rewrite(
    statement: &mut Statement,
    client: &HashMap<String, String>,
    aggregates: &std::collections::HashSet<String>,
) -> Result<(), QueryError> {
    let mut rewriter = Rewriter { client, aggregates };
    match statement.visit(&mut rewriter) {
        ControlFlow::Continue(()) => Ok(()),
        ControlFlow::Break(error) => Err(error),
    }
}

struct Rewriter<'a> {
    client: &'a HashMap<String, String>,
    /// Aggregate and window function names (lower case).
    aggregates: &'a std::collections::HashSet<String>,
}

/// The special registers PostgreSQL writes without parentheses (datafusion-postgres renames
/// `current_user` to `session_user` before this sees it).
const USER_REGISTERS: [&str; 4] = ["current_user", "session_user", "user", "current_role"];

/// The name a bare call of a register or `current_setting` gets as a column in PostgreSQL.
fn column_name(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Function(function) => {
            let name = function_name(function)?;
            (USER_REGISTERS.contains(&name.as_str()) || name == "current_setting").then_some(name)
        }
        Expr::Identifier(ident) if is_user_register(ident) => Some(ident.value.to_lowercase()),
        _ => None,
    }
}

fn function_name(function: &ast::Function) -> Option<String> {
    match function.name.0.as_slice() {
        [name] => Some(name.as_ident()?.value.to_lowercase()),
        [schema, name] if schema.as_ident()?.value.eq_ignore_ascii_case("pg_catalog") => {
            Some(name.as_ident()?.value.to_lowercase())
        }
        _ => None,
    }
}

fn is_user_register(ident: &Ident) -> bool {
    ident.quote_style.is_none()
        && USER_REGISTERS
            .iter()
            .any(|register| ident.value.eq_ignore_ascii_case(register))
}

fn literal(value: Option<String>) -> Expr {
    Expr::value(match value {
        Some(text) => Value::SingleQuotedString(text),
        None => Value::Null,
    })
}

/// `information_schema.columns` as PostgreSQL clients read it: DataFusion's rows, with
/// `data_type` a PostgreSQL type name (`timestamp with time zone`, not `Timestamp(µs, "UTC")`)
/// and `ordinal_position` counted from 1. It reads DataFusion's own view by its three-part name,
/// which [`Rewriter`] leaves alone.
const INFORMATION_SCHEMA_COLUMNS: &str = "SELECT * FROM (SELECT table_catalog, table_schema, \
     table_name, column_name, ordinal_position + 1 AS ordinal_position, column_default, \
     is_nullable, CASE \
       WHEN data_type IN ('Utf8', 'LargeUtf8', 'Utf8View') THEN 'text' \
       WHEN data_type = 'Boolean' THEN 'boolean' \
       WHEN data_type = 'Int16' THEN 'smallint' \
       WHEN data_type = 'Int32' THEN 'integer' \
       WHEN data_type = 'Int64' THEN 'bigint' \
       WHEN data_type = 'Float32' THEN 'real' \
       WHEN data_type = 'Float64' THEN 'double precision' \
       WHEN data_type LIKE 'Decimal%' THEN 'numeric' \
       WHEN data_type LIKE 'Timestamp(%,%' THEN 'timestamp with time zone' \
       WHEN data_type LIKE 'Timestamp(%' THEN 'timestamp without time zone' \
       WHEN data_type = 'Date32' THEN 'date' \
       WHEN data_type IN ('Binary', 'LargeBinary', 'BinaryView') THEN 'bytea' \
       WHEN data_type LIKE 'List(%' OR data_type LIKE 'LargeList(%' THEN 'ARRAY' \
       ELSE 'USER-DEFINED' END AS data_type, \
     character_maximum_length, character_octet_length, numeric_precision, \
     numeric_precision_radix, numeric_scale, datetime_precision, interval_type \
     FROM gpuledger.information_schema.columns) AS columns";

/// The derived table that stands for `information_schema.columns`, under `alias` (else
/// `columns`).
fn information_schema_columns(alias: Option<ast::TableAlias>) -> ast::TableFactor {
    // Parsed once per process; each reference takes a copy.
    static VIEW: std::sync::LazyLock<ast::TableFactor> = std::sync::LazyLock::new(|| {
        let parsed = datafusion::sql::sqlparser::parser::Parser::parse_sql(
            &datafusion::sql::sqlparser::dialect::PostgreSqlDialect {},
            INFORMATION_SCHEMA_COLUMNS,
        )
        .expect("the view parses");
        let Some(Statement::Query(query)) = parsed.into_iter().next() else {
            unreachable!("the view is a query");
        };
        let SetExpr::Select(select) = *query.body else {
            unreachable!("the view is a select");
        };
        select.from.into_iter().next().expect("one table").relation
    });
    let mut factor = VIEW.clone();
    if let (ast::TableFactor::Derived { alias: derived, .. }, Some(alias)) = (&mut factor, alias) {
        *derived = Some(alias);
    }
    factor
}

/// Whether `name` is `information_schema.columns` (two parts: DataFusion's own, three-part
/// name is what the view reads).
fn is_information_schema_columns(name: &ast::ObjectName) -> bool {
    let parts: Option<Vec<String>> = name
        .0
        .iter()
        .map(|part| part.as_ident().map(|i| i.value.to_lowercase()))
        .collect();
    parts.is_some_and(|parts| parts == ["information_schema", "columns"])
}

impl VisitorMut for Rewriter<'_> {
    type Break = QueryError;

    fn pre_visit_table_factor(
        &mut self,
        table_factor: &mut ast::TableFactor,
    ) -> ControlFlow<QueryError> {
        if let ast::TableFactor::Table { name, alias, .. } = table_factor
            && is_information_schema_columns(name)
        {
            *table_factor = information_schema_columns(alias.take());
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<QueryError> {
        if let SetExpr::Select(select) = query.body.as_mut() {
            // DataFusion, unlike PostgreSQL, wants the columns' names unique: a name given again
            // gets its place appended (datafusion-postgres has made `current_user`
            // `session_user` before this sees it).
            let mut given = std::collections::HashSet::new();
            for (place, item) in select.projection.iter_mut().enumerate() {
                if let SelectItem::UnnamedExpr(expr) = item
                    && let Some(name) = column_name(expr)
                {
                    let name = if given.insert(name.clone()) {
                        name
                    } else {
                        format!("{name}_{}", place + 1)
                    };
                    *item = SelectItem::ExprWithAlias {
                        expr: expr.clone(),
                        alias: Ident::with_quote('"', name),
                    };
                }
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<QueryError> {
        let user = || literal(self.client.get(pgwire::api::METADATA_USER).cloned());
        match expr {
            Expr::Subquery(query) => one_row_value(query, self.aggregates),
            // pg_class.reloptions (a relation's storage options, text[]): this catalog has no
            // such column, and no table here has options.
            Expr::CompoundIdentifier(parts)
                if parts.len() == 2 && parts[1].value.eq_ignore_ascii_case("reloptions") =>
            {
                *expr = no_options();
            }
            Expr::Identifier(ident) if is_user_register(ident) => *expr = user(),
            Expr::Function(function) => match function_name(function).as_deref() {
                Some(name) if USER_REGISTERS.contains(&name) && no_arguments(&function.args) => {
                    *expr = user();
                }
                Some("current_setting") => match self.current_setting(&function.args) {
                    Ok(value) => *expr = literal(value),
                    Err(error) => return ControlFlow::Break(error),
                },
                Some("array") => {
                    if let FunctionArguments::Subquery(query) = &function.args
                        && let Some(rewritten) =
                            array_of_unnest(query).or_else(|| array_of_subquery(query))
                    {
                        *expr = rewritten;
                    }
                }
                _ => {}
            },
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// `ARRAY(SELECT e FROM unnest(a) x)`, an array's elements mapped (psql's `\d+` sends it for a
/// table's options), as `array_transform(a, x -> e)`: DataFusion cannot unnest a column of the
/// outer query in a subquery's `FROM`. Only that exact shape is rewritten (no filter, grouping,
/// order or limit). Over a NULL array PostgreSQL gives an empty array and this NULL.
fn array_of_unnest(query: &Query) -> Option<Expr> {
    if query.with.is_some()
        || query.order_by.is_some()
        || query.limit_clause.is_some()
        || query.fetch.is_some()
    {
        return None;
    }
    let SetExpr::Select(select) = query.body.as_ref() else {
        return None;
    };
    let plain = select.selection.is_none()
        && select.having.is_none()
        && select.distinct.is_none()
        && matches!(&select.group_by, ast::GroupByExpr::Expressions(e, m) if e.is_empty() && m.is_empty());
    let (
        [SelectItem::UnnamedExpr(element) | SelectItem::ExprWithAlias { expr: element, .. }],
        [from],
    ) = (select.projection.as_slice(), select.from.as_slice())
    else {
        return None;
    };
    if !plain || !from.joins.is_empty() {
        return None;
    }
    let (array, alias) = match &from.relation {
        ast::TableFactor::Table {
            name,
            alias: Some(alias),
            args: Some(args),
            ..
        } if is_unnest(name) => match args.args.as_slice() {
            [FunctionArg::Unnamed(FunctionArgExpr::Expr(array))] => (array, alias),
            _ => return None,
        },
        ast::TableFactor::UNNEST {
            alias: Some(alias),
            array_exprs,
            with_offset: false,
            with_ordinality: false,
            ..
        } => match array_exprs.as_slice() {
            [array] => (array, alias),
            _ => return None,
        },
        _ => return None,
    };
    // The element is the alias's one column when it names one, else the alias itself.
    let variable = match alias.columns.as_slice() {
        [] => alias.name.clone(),
        [column] => column.name.clone(),
        _ => return None,
    };
    let mut call = datafusion::sql::sqlparser::parser::Parser::new(
        &datafusion::sql::sqlparser::dialect::PostgreSqlDialect {},
    )
    .try_with_sql("array_transform(array, element)")
    .ok()?
    .parse_expr()
    .ok()?;
    let lambda = Expr::Lambda(ast::LambdaFunction {
        params: ast::OneOrManyWithParens::One(ast::LambdaFunctionParameter {
            name: variable,
            data_type: None,
        }),
        body: Box::new(element.clone()),
        syntax: ast::LambdaSyntax::Arrow,
    });
    if let Expr::Function(function) = &mut call
        && let FunctionArguments::List(list) = &mut function.args
        && let [
            FunctionArg::Unnamed(FunctionArgExpr::Expr(first)),
            FunctionArg::Unnamed(FunctionArgExpr::Expr(second)),
        ] = list.args.as_mut_slice()
    {
        *first = array.clone();
        *second = lambda;
    }
    Some(call)
}

/// A scalar subquery that selects one expression with no aggregate, window or nested subquery
/// in it, and has no grouping, order or limit, takes its value through [`SubqueryValue`], so that
/// DataFusion plans it even when it is correlated. Other subqueries are left as they are.
fn one_row_value(query: &mut Query, aggregates: &std::collections::HashSet<String>) {
    if query.with.is_some()
        || query.order_by.is_some()
        || query.limit_clause.is_some()
        || query.fetch.is_some()
    {
        return;
    }
    let SetExpr::Select(select) = query.body.as_mut() else {
        return;
    };
    let ungrouped = select.having.is_none()
        && select.distinct.is_none()
        && matches!(&select.group_by, ast::GroupByExpr::Expressions(e, m) if e.is_empty() && m.is_empty());
    let [SelectItem::UnnamedExpr(element) | SelectItem::ExprWithAlias { expr: element, .. }] =
        select.projection.as_mut_slice()
    else {
        return;
    };
    let mut aggregated = false;
    let _ = ast::visit_expressions(element, |e| {
        aggregated |= match e {
            Expr::Function(function) => {
                function.over.is_some()
                    || function_name(function).is_none_or(|name| aggregates.contains(&name))
            }
            Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => true,
            _ => false,
        };
        ControlFlow::<()>::Continue(())
    });
    if !ungrouped || aggregated {
        return;
    }
    let Ok(Expr::Function(mut function)) = datafusion::sql::sqlparser::parser::Parser::new(
        &datafusion::sql::sqlparser::dialect::PostgreSqlDialect {},
    )
    .try_with_sql(&format!("{}(element)", SubqueryValue::NAME))
    .and_then(|mut parser| parser.parse_expr()) else {
        return;
    };
    if let FunctionArguments::List(list) = &mut function.args
        && let [FunctionArg::Unnamed(FunctionArgExpr::Expr(argument))] = list.args.as_mut_slice()
    {
        *argument = element.clone();
        *element = Expr::Function(function);
    }
}

/// `CAST(NULL AS text[])`: the options of a relation that has none.
fn no_options() -> Expr {
    datafusion::sql::sqlparser::parser::Parser::new(
        &datafusion::sql::sqlparser::dialect::PostgreSqlDialect {},
    )
    .try_with_sql("CAST(NULL AS TEXT[])")
    .and_then(|mut parser| parser.parse_expr())
    .unwrap_or_else(|_| literal(None))
}

/// `unnest` or `pg_catalog.unnest`.
fn is_unnest(name: &ast::ObjectName) -> bool {
    let parts: Vec<Option<&Ident>> = name.0.iter().map(|p| p.as_ident()).collect();
    match parts.as_slice() {
        [Some(f)] => f.value.eq_ignore_ascii_case("unnest"),
        [Some(schema), Some(f)] => {
            schema.value.eq_ignore_ascii_case("pg_catalog")
                && f.value.eq_ignore_ascii_case("unnest")
        }
        _ => false,
    }
}

/// PostgreSQL's array constructor `ARRAY(SELECT e FROM …)`, which DataFusion lacks, as the scalar
/// subquery `(SELECT array_agg(e) FROM …)` (psql's `\du` and `\d+` send it). Only a plain
/// `SELECT` of one column is rewritten; any other form stays as it is and DataFusion says it
/// cannot plan it. One difference remains: over no rows PostgreSQL gives an empty array and
/// `array_agg` NULL.
fn array_of_subquery(query: &Query) -> Option<Expr> {
    let mut query = query.clone();
    let SetExpr::Select(select) = query.body.as_mut() else {
        return None;
    };
    let [SelectItem::UnnamedExpr(element) | SelectItem::ExprWithAlias { expr: element, .. }] =
        select.projection.as_mut_slice()
    else {
        return None;
    };
    let mut aggregate = datafusion::sql::sqlparser::parser::Parser::new(
        &datafusion::sql::sqlparser::dialect::PostgreSqlDialect {},
    )
    .try_with_sql("array_agg(element)")
    .ok()?
    .parse_expr()
    .ok()?;
    if let Expr::Function(function) = &mut aggregate
        && let FunctionArguments::List(list) = &mut function.args
        && let [FunctionArg::Unnamed(FunctionArgExpr::Expr(argument))] = list.args.as_mut_slice()
    {
        *argument = element.clone();
    }
    select.projection = vec![SelectItem::UnnamedExpr(aggregate)];
    // The order of the elements is the subquery's: it moves into the aggregate.
    if let Some(order_by) = query.order_by.take()
        && let ast::OrderByKind::Expressions(order) = order_by.kind
        && let Some(SelectItem::UnnamedExpr(Expr::Function(function))) =
            select.projection.first_mut()
        && let FunctionArguments::List(list) = &mut function.args
    {
        list.clauses
            .push(ast::FunctionArgumentClause::OrderBy(order));
    }
    Some(Expr::Subquery(Box::new(query)))
}

/// A call's arguments when every one is a literal.
fn literal_arguments(args: &FunctionArguments) -> Option<Vec<&Value>> {
    match args {
        FunctionArguments::List(list) => list
            .args
            .iter()
            .map(|arg| match arg {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(value))) => {
                    Some(&value.value)
                }
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// `SELECT set_config(name, value, is_local)` on its own, as pg_dump and drivers send it: the
/// setting and its new value, for the connection to keep like a `SET`. `None` for any other
/// statement (set_config inside a larger query is not answered: DataFusion has no such
/// function, and says so).
pub fn set_config_call(statement: &Statement) -> Option<Result<(String, String), QueryError>> {
    let Statement::Query(query) = statement else {
        return None;
    };
    let SetExpr::Select(select) = query.body.as_ref() else {
        return None;
    };
    let [item] = select.projection.as_slice() else {
        return None;
    };
    let (SelectItem::UnnamedExpr(Expr::Function(function))
    | SelectItem::ExprWithAlias {
        expr: Expr::Function(function),
        ..
    }) = item
    else {
        return None;
    };
    if !select.from.is_empty() || function_name(function).as_deref() != Some("set_config") {
        return None;
    }
    Some(match literal_arguments(&function.args).as_deref() {
        Some(
            [
                Value::SingleQuotedString(name),
                Value::SingleQuotedString(value),
                Value::Boolean(false),
            ],
        ) => Ok((name.to_lowercase(), value.clone())),
        Some([_, _, Value::Boolean(true)]) => Err(QueryError::NotSupported(
            "set_config(name, value, true): a setting local to a transaction is not kept; \
             give false (the connection's settings last for the session)"
                .into(),
        )),
        _ => Err(QueryError::NotSupported(
            "set_config takes a setting's name and value as string literals and is_local as \
             false"
                .into(),
        )),
    })
}

/// The one row `set_config` answers with: the setting's new value.
pub async fn set_config_answer(
    ctx: &SessionContext,
    value: String,
    format: &Format,
) -> PgWireResult<Response> {
    show(ctx, "set_config", value, format).await
}

fn no_arguments(args: &FunctionArguments) -> bool {
    match args {
        FunctionArguments::None => true,
        FunctionArguments::List(list) => list.args.is_empty(),
        FunctionArguments::Subquery(_) => false,
    }
}

impl Rewriter<'_> {
    /// `current_setting(name [, missing_ok])` with literal arguments.
    fn current_setting(&self, args: &FunctionArguments) -> Result<Option<String>, QueryError> {
        let (name, missing_ok) = match literal_arguments(args).as_deref() {
            Some([Value::SingleQuotedString(name)]) => (name, false),
            Some([Value::SingleQuotedString(name), Value::Boolean(missing_ok)]) => {
                (name, *missing_ok)
            }
            _ => {
                return Err(QueryError::UnknownSetting(
                    "current_setting takes a setting's name as a string literal, and optionally \
                     missing_ok as true or false"
                        .into(),
                ));
            }
        };
        match setting(name, self.client) {
            Some(value) => Ok(Some(value)),
            None if missing_ok => Ok(None),
            None => Err(QueryError::UnknownSetting(format!(
                "unrecognized configuration parameter \"{name}\""
            ))),
        }
    }
}

/// Whether [`answer_session_statement`] answers `statement`.
pub fn is_session_statement(statement: &Statement, client: &HashMap<String, String>) -> bool {
    match statement {
        Statement::Deallocate { .. }
        | Statement::Discard { .. }
        | Statement::Savepoint { .. }
        | Statement::ReleaseSavepoint { .. }
        | Statement::Rollback {
            savepoint: Some(_), ..
        } => true,
        Statement::ShowVariable { variable } => shown_setting(variable, client).is_some(),
        _ => set_config_call(statement).is_some(),
    }
}

/// The setting a `SHOW` names, when it is one of [`setting`]'s: (column name, value).
fn shown_setting(variable: &[Ident], client: &HashMap<String, String>) -> Option<(String, String)> {
    let [name] = variable else {
        return None;
    };
    let name = name.value.to_lowercase();
    let value = setting(&name, client)?;
    Some((name, value))
}

/// The columns a session statement answers with: a `SHOW`'s one text column, else none.
pub fn session_statement_columns(
    statement: &Statement,
    format: &Format,
) -> PgWireResult<Vec<FieldInfo>> {
    match statement {
        Statement::ShowVariable { variable } if variable.len() == 1 => {
            let schema = shown_schema(&variable[0].value.to_lowercase());
            arrow_schema_to_pg_fields(&schema, format, None)
        }
        _ if set_config_call(statement).is_some() => {
            arrow_schema_to_pg_fields(&shown_schema("set_config"), format, None)
        }
        _ => Ok(Vec::new()),
    }
}

fn shown_schema(name: &str) -> Schema {
    Schema::new(vec![Field::new(name, DataType::Utf8, false)])
}

/// Answers the statements about the session itself (`DEALLOCATE`, `DISCARD`, and `SHOW` of a
/// setting of [`setting`]), rows in `format`; `None` for any other.
pub async fn answer_session_statement(
    statement: &Statement,
    ctx: &SessionContext,
    client: &HashMap<String, String>,
    store: &impl PortalStore,
    format: &Format,
) -> Option<PgWireResult<Response>> {
    match statement {
        Statement::Deallocate { name, .. } => {
            if name.value.eq_ignore_ascii_case("all") && name.quote_style.is_none() {
                // pgwire keeps no list of the statements to drop; a statement prepared again
                // under a name replaces the one before, which is what a client that deallocated
                // them all does next.
                Some(Ok(Response::Execution(Tag::new("DEALLOCATE ALL"))))
            } else {
                store.rm_statement(&name.value);
                Some(Ok(Response::Execution(Tag::new("DEALLOCATE"))))
            }
        }
        Statement::Discard { object_type } => {
            if matches!(object_type, DiscardObject::ALL) {
                // `DISCARD ALL` closes every portal (cursor) of the session.
                store.clear_portals();
            }
            Some(Ok(Response::Execution(Tag::new(&format!(
                "DISCARD {object_type}"
            )))))
        }
        // Savepoints mark nothing to undo: every session only reads. Drivers set them inside the
        // transactions they open (psycopg's `conn.transaction()` nested, SQLAlchemy's dialect
        // start-up), so they get PostgreSQL's tags and the transaction goes on.
        Statement::Savepoint { .. } => Some(Ok(Response::Execution(Tag::new("SAVEPOINT")))),
        Statement::ReleaseSavepoint { .. } => Some(Ok(Response::Execution(Tag::new("RELEASE")))),
        Statement::Rollback {
            savepoint: Some(_), ..
        } => Some(Ok(Response::Execution(Tag::new("ROLLBACK")))),
        Statement::ShowVariable { variable } => {
            let (name, value) = shown_setting(variable, client)?;
            Some(show(ctx, &name, value, format).await)
        }
        _ => None,
    }
}

/// One row, one text column named after the setting, as PostgreSQL's `SHOW`.
async fn show(
    ctx: &SessionContext,
    name: &str,
    value: String,
    format: &Format,
) -> PgWireResult<Response> {
    let schema = Arc::new(shown_schema(name));
    let batch = RecordBatch::try_new(schema, vec![Arc::new(StringArray::from(vec![value]))])
        .map_err(|error| pg_error(QueryError::from(DataFusionError::from(error)).into()))?;
    let frame = ctx
        .read_batch(batch)
        .map_err(|error| pg_error(QueryError::from(error).into()))?;
    encode_dataframe(frame, format, None)
        .await
        .map(Response::Query)
}

#[cfg(test)]
mod tests;
