//! Bounds on a user's statement, checked before it is planned: its size, how deep its
//! expressions and subqueries nest, and how many expressions, set operations and relations it
//! has. Planning recurses over all of them, so a statement past these bounds is refused
//! (SQLSTATE 54000 or 54001, HTTP 400) rather than planned for minutes or run into the stack.
//!
//! Two passes, both cheap: the tokens (before anything recursive touches the text), which bound
//! how deep the parsed statement can be, then the parsed statement itself, whose walk stops at
//! the first bound it passes.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{self, SetExpr, Visit, Visitor};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

use crate::error::QueryError;

/// The largest statement, in bytes of text.
pub const MAX_STATEMENT_BYTES: usize = 1 << 20;
/// Operators and keywords in one statement: each can add a level to the parsed statement.
pub const MAX_OPERATORS: usize = 20_000;
/// How deep expressions and queries nest (`1+1+…+1` with n terms nests n deep).
pub const MAX_DEPTH: usize = 512;
/// Expressions in one statement (an `IN` list of n values has n + 1).
pub const MAX_EXPRESSIONS: usize = 100_000;
/// `UNION`, `INTERSECT` and `EXCEPT` in one statement.
pub const MAX_SET_OPERATIONS: usize = 256;
/// Tables, subqueries and table functions in `FROM` clauses, all told.
pub const MAX_RELATIONS: usize = 256;

/// Refuses a statement text past [`MAX_STATEMENT_BYTES`] or [`MAX_OPERATORS`].
pub fn check_text(sql: &str) -> Result<(), QueryError> {
    if sql.len() > MAX_STATEMENT_BYTES {
        return Err(QueryError::StatementTooLarge {
            bytes: sql.len(),
            limit: MAX_STATEMENT_BYTES,
        });
    }
    // A statement that does not tokenize fails in the parser, with the parser's message.
    let Ok(tokens) = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize() else {
        return Ok(());
    };
    let operators = tokens.iter().filter(|t| is_operator(t)).count();
    if operators > MAX_OPERATORS {
        return Err(too_complex(format!(
            "it has {operators} operators and keywords, past the limit of {MAX_OPERATORS}"
        )));
    }
    Ok(())
}

/// Whether `token` can make the parsed statement deeper: anything but names, literals and
/// separators.
fn is_operator(token: &Token) -> bool {
    match token {
        Token::Word(word) => {
            word.quote_style.is_none()
                && word.keyword != datafusion::sql::sqlparser::keywords::Keyword::NoKeyword
        }
        Token::EOF
        | Token::Number(..)
        | Token::Char(_)
        | Token::SingleQuotedString(_)
        | Token::DoubleQuotedString(_)
        | Token::TripleSingleQuotedString(_)
        | Token::TripleDoubleQuotedString(_)
        | Token::DollarQuotedString(_)
        | Token::SingleQuotedByteStringLiteral(_)
        | Token::DoubleQuotedByteStringLiteral(_)
        | Token::TripleSingleQuotedByteStringLiteral(_)
        | Token::TripleDoubleQuotedByteStringLiteral(_)
        | Token::SingleQuotedRawStringLiteral(_)
        | Token::DoubleQuotedRawStringLiteral(_)
        | Token::TripleSingleQuotedRawStringLiteral(_)
        | Token::TripleDoubleQuotedRawStringLiteral(_)
        | Token::NationalStringLiteral(_)
        | Token::QuoteDelimitedStringLiteral(_)
        | Token::NationalQuoteDelimitedStringLiteral(_)
        | Token::EscapedStringLiteral(_)
        | Token::UnicodeStringLiteral(_)
        | Token::HexStringLiteral(_)
        | Token::Placeholder(_)
        | Token::Comma
        | Token::Whitespace(_)
        | Token::LParen
        | Token::RParen
        | Token::Period
        | Token::SemiColon => false,
        _ => true,
    }
}

/// Refuses a parsed `statement` past the depth, expression, set-operation or relation bounds.
pub fn check_statement<V: Visit>(statement: &V) -> Result<(), QueryError> {
    let mut walk = Walk::default();
    match statement.visit(&mut walk) {
        ControlFlow::Break(what) => Err(too_complex(what)),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// A DataFusion statement: its SQL statement, or the query of an `EXPLAIN` or `COPY`.
pub fn check_df_statement(
    statement: &datafusion::sql::parser::Statement,
) -> Result<(), QueryError> {
    use datafusion::sql::parser::{CopyToSource, Statement};
    match statement {
        Statement::Statement(statement) => check_statement(statement.as_ref()),
        Statement::Explain(explain) => check_df_statement(&explain.statement),
        Statement::CopyTo(copy) => match &copy.source {
            CopyToSource::Query(query) => check_statement(query.as_ref()),
            CopyToSource::Relation(_) => Ok(()),
        },
        Statement::CreateExternalTable(_) | Statement::Reset(_) => Ok(()),
    }
}

fn too_complex(what: String) -> QueryError {
    QueryError::StatementTooComplex(what)
}

#[derive(Default)]
struct Walk {
    depth: usize,
    expressions: usize,
    set_operations: usize,
    relations: usize,
}

impl Walk {
    fn deeper(&mut self) -> ControlFlow<String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return ControlFlow::Break(format!(
                "its expressions and subqueries nest more than {MAX_DEPTH} deep"
            ));
        }
        ControlFlow::Continue(())
    }
}

impl Visitor for Walk {
    type Break = String;

    fn pre_visit_query(&mut self, query: &ast::Query) -> ControlFlow<String> {
        self.deeper()?;
        // The set operations of this query's body; a parenthesized query in it is visited as
        // a query of its own.
        let mut pending = vec![query.body.as_ref()];
        while let Some(body) = pending.pop() {
            if let SetExpr::SetOperation { left, right, .. } = body {
                self.set_operations += 1;
                if self.set_operations > MAX_SET_OPERATIONS {
                    return ControlFlow::Break(format!(
                        "it has more than {MAX_SET_OPERATIONS} UNION, INTERSECT or EXCEPT"
                    ));
                }
                pending.push(left);
                pending.push(right);
            }
        }
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _query: &ast::Query) -> ControlFlow<String> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, _factor: &ast::TableFactor) -> ControlFlow<String> {
        self.relations += 1;
        if self.relations > MAX_RELATIONS {
            return ControlFlow::Break(format!(
                "it reads more than {MAX_RELATIONS} tables, subqueries or table functions"
            ));
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, _expr: &ast::Expr) -> ControlFlow<String> {
        self.expressions += 1;
        if self.expressions > MAX_EXPRESSIONS {
            return ControlFlow::Break(format!("it has more than {MAX_EXPRESSIONS} expressions"));
        }
        self.deeper()
    }

    fn post_visit_expr(&mut self, _expr: &ast::Expr) -> ControlFlow<String> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }
}

/// The session settings a client may change: the ones PostgreSQL clients set as they connect,
/// which the Postgres wire answers itself. The engine's settings (`datafusion.…`: memory, spill
/// directory, parallelism) are not among them, however the name is quoted.
pub const ALLOWED_SETTINGS: [&str; 13] = [
    "application_name",
    "bytea_output",
    "client_encoding",
    "client_min_messages",
    "datestyle",
    "extra_float_digits",
    "intervalstyle",
    "lc_messages",
    "search_path",
    "standard_conforming_strings",
    "statement_timeout",
    "time zone",
    "timezone",
];

/// A setting's name as PostgreSQL compares it: its parts, unquoted and lower-cased, by dots.
fn setting_name(name: &ast::ObjectName) -> String {
    name.0
        .iter()
        .map(|part| match part.as_ident() {
            Some(ident) => ident.value.to_ascii_lowercase(),
            None => part.to_string().to_ascii_lowercase(),
        })
        .collect::<Vec<_>>()
        .join(".")
}

fn refuse_setting(name: &str) -> QueryError {
    QueryError::Refused(format!(
        "only read-only queries are allowed (the setting '{name}' cannot be changed; a session \
         may set only {})",
        ALLOWED_SETTINGS.join(", ")
    ))
}

fn allowed(name: &ast::ObjectName) -> Result<(), QueryError> {
    let name = setting_name(name);
    if ALLOWED_SETTINGS.contains(&name.as_str()) {
        Ok(())
    } else {
        Err(refuse_setting(&name))
    }
}

/// Refuses a `SET` or `RESET` of anything but [`ALLOWED_SETTINGS`] (and `SET TIME ZONE`,
/// `SET NAMES`, `SET TRANSACTION`, which change nothing the limits depend on). Other
/// statements pass: whether they only read is the planner's to say.
pub fn check_setting(statement: &ast::Statement) -> Result<(), QueryError> {
    use ast::{Reset, Set, Statement};
    match statement {
        Statement::Set(set) => match set {
            Set::SingleAssignment { variable, .. } => allowed(variable),
            Set::ParenthesizedAssignments { variables, .. } => {
                variables.iter().try_for_each(allowed)
            }
            Set::MultipleAssignments { assignments } => {
                assignments.iter().try_for_each(|a| allowed(&a.name))
            }
            Set::SetTimeZone { .. }
            | Set::SetNames { .. }
            | Set::SetNamesDefault {}
            | Set::SetTransaction { .. } => Ok(()),
            other => Err(QueryError::Refused(format!(
                "only read-only queries are allowed ('{other}' is not; a session may set only {})",
                ALLOWED_SETTINGS.join(", ")
            ))),
        },
        Statement::Reset(reset) => match &reset.reset {
            Reset::ConfigurationParameter(name) => allowed(name),
            Reset::ALL => Err(refuse_setting("all")),
        },
        _ => Ok(()),
    }
}
