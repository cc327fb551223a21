//! `POST /graphql`: the body is parsed, the query parsed with graphql-parser,
//! checked against the schema subset in [`schema`] (unknown fields and
//! arguments, types, pagination bounds, node limit), priced as GitHub prices
//! queries (at least one point; GraphQL has no conditional requests), and run.
//! Problems GitHub reports in `errors[]` come back with HTTP 200, as GitHub
//! does, and are violations.

mod exec;
pub(crate) mod schema;
mod select;
mod validate;
mod values;

use std::collections::{BTreeSet, HashMap};

use graphql_parser::Pos;
use graphql_parser::query::{Definition, OperationDefinition, SelectionSet, VariableDefinition};
use serde_json::{Map, Value, json};

use crate::common::http::Reply;
use crate::github::graphql::exec::Exec;
use crate::github::graphql::select::Fragments;
use crate::github::graphql::validate::validate;
use crate::github::graphql::values::{check_json, to_json, type_string};
use crate::github::model::Resource;
use crate::github::server::Ctx;
use crate::github::state::State;

/// A GraphQL error object with its location and, if known, its path.
pub(crate) fn error(message: String, pos: Pos, path: Option<&[String]>) -> Value {
    let mut e = json!({
        "message": message,
        "locations": [{"line": pos.line, "column": pos.column}],
    });
    if let Some(path) = path {
        e["path"] = json!(path);
    }
    e
}

/// Adds GitHub's `type` member (`NOT_FOUND`, `EXCESSIVE_PAGINATION`, …).
pub(crate) fn typed(mut e: Value, kind: &str) -> Value {
    e["type"] = json!(kind);
    e
}

/// Adds graphql-ruby's `extensions` with a `code` and details.
pub(crate) fn coded(mut e: Value, code: &str, details: Value) -> Value {
    let mut ext = details.as_object().cloned().unwrap_or_default();
    ext.insert("code".to_owned(), json!(code));
    e["extensions"] = Value::Object(ext);
    e
}

/// The operation to run and what it needs.
struct Operation<'d> {
    mutation: bool,
    label: String,
    variables: &'d [VariableDefinition<'static, String>],
    set: &'d SelectionSet<'static, String>,
}

/// Handles one `POST /graphql` (after the header, token and fault checks).
pub(crate) fn handle(state: &mut State, ctx: &Ctx<'_>) -> Reply {
    let (status, body, charged) = run(state, ctx);
    if let Some(errors) = body.get("errors").and_then(Value::as_array) {
        for e in errors {
            let message = e["message"].as_str().unwrap_or("");
            let kind = e["type"].as_str().unwrap_or("");
            // A missing object is an answer a test may ask for; the rest are
            // mistakes in the query.
            if kind != "NOT_FOUND" && kind != "RATE_LIMITED" {
                state.violation(format!("{}: GraphQL error: {message}", ctx.what()));
            }
        }
    }
    state.quotas.charge(Resource::GraphQl, charged);
    let mut reply = Reply::json(status, body);
    reply.add_headers(state.quotas.headers(Resource::GraphQl));
    reply
}

/// Status, body and the points charged.
fn run(state: &mut State, ctx: &Ctx<'_>) -> (u16, Value, u64) {
    let only = |message: String| (200, json!({"errors": [{"message": message}]}), 1);
    let body: Value = match serde_json::from_slice(&ctx.req.body) {
        Ok(Value::Object(map)) => Value::Object(map),
        _ => {
            state.violation(format!("{}: the body is not a JSON object", ctx.what()));
            let body = json!({"message": "Problems parsing JSON", "documentation_url": "https://docs.github.com/graphql"});
            return (400, body, 0);
        }
    };
    if let Some(map) = body.as_object() {
        let unknown: Vec<&str> = map
            .keys()
            .map(String::as_str)
            .filter(|k| !["query", "variables", "operationName"].contains(k))
            .collect();
        if !unknown.is_empty() {
            state.violation(format!(
                "{}: unknown body member(s) {}",
                ctx.what(),
                unknown.join(", ")
            ));
        }
    }
    let Some(text) = body.get("query").and_then(Value::as_str) else {
        return only("A query attribute must be specified and must be a string.".to_owned());
    };
    let vars = match body.get("variables") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map.clone(),
        Some(_) => return only("Variables must be an object.".to_owned()),
    };
    let document = match graphql_parser::parse_query::<String>(text) {
        Ok(doc) => doc.into_static(),
        Err(e) => return only(format!("Parse error: {}", e.to_string().trim())),
    };
    let mut fragments = Fragments {
        map: HashMap::new(),
        used: BTreeSet::new(),
    };
    let mut operations = Vec::new();
    for definition in &document.definitions {
        match definition {
            Definition::Fragment(f) => {
                fragments.map.insert(f.name.as_str(), f);
            }
            Definition::Operation(op) => operations.push(op),
        }
    }
    let wanted = body.get("operationName").and_then(Value::as_str);
    let op = match pick(&operations, wanted) {
        Ok(op) => op,
        Err(message) => return only(message),
    };
    let (coerced, mut errors) = coerce(op.variables, &vars);
    let declared: HashMap<String, String> = op
        .variables
        .iter()
        .map(|v| (v.name.clone(), type_string(&v.var_type)))
        .collect();
    let undeclared: Vec<&String> = vars.keys().filter(|k| !declared.contains_key(*k)).collect();
    if !undeclared.is_empty() {
        state.violation(format!(
            "{}: variables the operation does not declare: {undeclared:?}",
            ctx.what()
        ));
    }
    let root = if op.mutation { "Mutation" } else { "Query" };
    let analysis = validate(root, op.set, &mut fragments, &coerced, &declared, &op.label);
    for v in &analysis.violations {
        state.violation(format!("{}: {v}", ctx.what()));
    }
    errors.extend(analysis.errors.iter().cloned());
    if !errors.is_empty() {
        return (200, json!({"errors": errors}), 1);
    }
    let cost = analysis.cost();
    let remaining = state.quotas.budget(Resource::GraphQl).remaining();
    if cost > remaining {
        let id = state.user_id(ctx.login);
        let body = json!({"errors": [{"type": "RATE_LIMITED", "message": format!("API rate limit exceeded for user ID {id}.")}]});
        return (200, body, 0);
    }
    // `rateLimit` reports the state after this query is paid for.
    state.quotas.charge(Resource::GraphQl, cost);
    fragments.used.clear();
    let mut exec = Exec {
        state,
        login: ctx.login.to_owned(),
        installation: ctx.installation,
        fragments,
        vars: coerced,
        errors: Vec::new(),
        violations: Vec::new(),
        cost,
        nodes: analysis.nodes,
    };
    let data = exec.run(op.mutation, op.set);
    let (errors, violations) = (exec.errors, exec.violations);
    for v in violations {
        state.violation(format!("{}: {v}", ctx.what()));
    }
    let mut body = json!({"data": data});
    if !errors.is_empty() {
        body["errors"] = Value::Array(errors);
    }
    (200, body, 0)
}

/// The name of an operation, if it has one.
fn operation_name<'d>(op: &'d OperationDefinition<'static, String>) -> Option<&'d str> {
    match op {
        OperationDefinition::Query(q) => q.name.as_deref(),
        OperationDefinition::Mutation(m) => m.name.as_deref(),
        OperationDefinition::Subscription(s) => s.name.as_deref(),
        OperationDefinition::SelectionSet(_) => None,
    }
}

/// Picks the operation to run, as GraphQL's `GetOperation` does.
fn pick<'d>(
    operations: &[&'d OperationDefinition<'static, String>],
    wanted: Option<&str>,
) -> Result<Operation<'d>, String> {
    let op = match wanted {
        Some(name) => operations
            .iter()
            .find(|op| operation_name(op) == Some(name))
            .ok_or_else(|| format!("No operation named \"{name}\""))?,
        None if operations.len() == 1 => &operations[0],
        None if operations.is_empty() => return Err("No operations in query document".to_owned()),
        None => return Err("An operation name is required".to_owned()),
    };
    let label = |kind: &str, name: Option<&str>| match name {
        Some(name) => format!("{kind} {name}"),
        None => kind.to_owned(),
    };
    Ok(match op {
        OperationDefinition::SelectionSet(set) => Operation {
            mutation: false,
            label: "query".to_owned(),
            variables: &[],
            set,
        },
        OperationDefinition::Query(q) => Operation {
            mutation: false,
            label: label("query", q.name.as_deref()),
            variables: &q.variable_definitions,
            set: &q.selection_set,
        },
        OperationDefinition::Mutation(m) => Operation {
            mutation: true,
            label: label("mutation", m.name.as_deref()),
            variables: &m.variable_definitions,
            set: &m.selection_set,
        },
        OperationDefinition::Subscription(_) => {
            return Err("Schema is not configured for subscriptions".to_owned());
        }
    })
}

/// Coerces the given variables to their declared types, with defaults.
fn coerce(
    definitions: &[VariableDefinition<'static, String>],
    given: &Map<String, Value>,
) -> (Map<String, Value>, Vec<Value>) {
    let mut out = Map::new();
    let mut errors = Vec::new();
    for def in definitions {
        let ty = type_string(&def.var_type);
        let value = match given.get(&def.name) {
            Some(v) => Some(v.clone()),
            None => def.default_value.as_ref().map(|d| to_json(d, &Map::new())),
        };
        let checked = value.clone().unwrap_or(Value::Null);
        if let Err(explanation) = check_json(&checked, &ty) {
            let message = if explanation.ends_with("isn't a defined input type") {
                format!(
                    "{} isn't a defined input type (on ${})",
                    schema::base(&ty),
                    def.name
                )
            } else {
                format!(
                    "Variable ${} of type {ty} was provided invalid value",
                    def.name
                )
            };
            errors.push(coded(
                error(message, def.position, None),
                "variableMismatch",
                json!({"value": checked, "problems": [{"path": [], "explanation": explanation}]}),
            ));
            continue;
        }
        if let Some(value) = value {
            out.insert(def.name.clone(), value);
        }
    }
    (out, errors)
}
