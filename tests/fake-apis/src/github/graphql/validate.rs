//! Static checks of an operation against the schema subset, before anything
//! runs, and its price: GitHub rejects a query with an unknown field or
//! argument, a wrongly typed value, or a connection without `first`/`last`
//! in range, with `errors[]` and no `data`.

use std::collections::{BTreeSet, HashMap};

use graphql_parser::query::{Selection, Value as Gql};
use serde_json::{Map, Value, json};

use crate::github::graphql::schema::{FieldDef, base, field_of, is_connection, is_leaf};
use crate::github::graphql::select::{Fragments, GField, GSet, collect};
use crate::github::graphql::values::{Problem, check_literal, to_json, variables_in};
use crate::github::graphql::{coded, error, typed};

/// A query may touch at most this many nodes.
pub(crate) const MAX_NODES: u64 = 500_000;

/// What validation found.
#[derive(Debug, Default)]
pub(crate) struct Analysis {
    pub errors: Vec<Value>,
    /// Legal but suspect choices (e.g. `first: 0`), for the violation list.
    pub violations: Vec<String>,
    /// Requests needed to fill every connection, assuming full pages.
    pub requests: u64,
    /// Nodes the query may return.
    pub nodes: u64,
}

impl Analysis {
    /// GitHub's price: requests / 100, rounded, at least 1.
    pub fn cost(&self) -> u64 {
        ((self.requests + 50) / 100).max(1)
    }
}

struct Validator<'d, 'a> {
    fragments: &'a mut Fragments<'d>,
    vars: &'a Map<String, Value>,
    var_types: &'a HashMap<String, String>,
    op_label: &'a str,
    out: Analysis,
}

/// Validates an operation's selection set on its root type.
pub(crate) fn validate<'d>(
    root: &str,
    set: &'d GSet,
    fragments: &mut Fragments<'d>,
    vars: &Map<String, Value>,
    var_types: &HashMap<String, String>,
    op_label: &str,
) -> Analysis {
    let mut v = Validator {
        fragments,
        vars,
        var_types,
        op_label,
        out: Analysis::default(),
    };
    let mut path = vec![op_label.to_owned()];
    v.selection(root, set, &mut path, 1);
    let mut used = BTreeSet::new();
    scan_vars(set, v.fragments, &mut used, 0);
    for name in v.var_types.keys() {
        if !used.contains(name) {
            v.out.errors.push(coded(
                json!({"message": format!("Variable ${name} is declared by {op_label} but not used")}),
                "variableNotUsed",
                json!({"variableName": name}),
            ));
        }
    }
    let unused: Vec<String> = v
        .fragments
        .map
        .keys()
        .filter(|k| !v.fragments.used.contains(**k))
        .map(|k| (*k).to_owned())
        .collect();
    for name in unused {
        v.out.errors.push(coded(
            json!({"message": format!("Fragment {name} was defined, but not used")}),
            "useAndDefineFragment",
            json!({"fragmentName": name}),
        ));
    }
    if v.out.nodes > MAX_NODES {
        v.out.errors.push(typed(
            json!({"message": format!(
                "This query requests up to {} possible nodes which exceeds the maximum limit of 500,000.",
                v.out.nodes
            )}),
            "MAX_NODE_LIMIT_EXCEEDED",
        ));
    }
    v.out
}

impl<'d> Validator<'d, '_> {
    fn selection(
        &mut self,
        type_name: &str,
        set: &'d GSet,
        path: &mut Vec<String>,
        multiplier: u64,
    ) {
        let fields = collect(
            type_name,
            set,
            self.fragments,
            self.vars,
            &mut self.out.errors,
        );
        for (on, f) in fields {
            let key = f.alias.as_ref().unwrap_or(&f.name).clone();
            path.push(key);
            self.field(&on, f, path, multiplier);
            path.pop();
        }
    }

    fn field(&mut self, type_name: &str, f: &'d GField, path: &mut Vec<String>, multiplier: u64) {
        let name = f.name.as_str();
        if name == "__typename" {
            if !f.selection_set.items.is_empty() || !f.arguments.is_empty() {
                self.out.errors.push(error(
                    "Field '__typename' takes no arguments or selections".to_owned(),
                    f.position,
                    Some(path),
                ));
            }
            return;
        }
        let Some(def) = field_of(type_name, name) else {
            self.out.errors.push(coded(
                error(
                    format!("Field '{name}' doesn't exist on type '{type_name}'"),
                    f.position,
                    Some(path),
                ),
                "undefinedField",
                json!({"typeName": type_name, "fieldName": name}),
            ));
            return;
        };
        self.arguments(f, def, path);
        let target = base(def.ty);
        if is_leaf(target) {
            if !f.selection_set.items.is_empty() {
                self.out.errors.push(coded(
                    error(
                        format!("Selections can't be made on scalars (field '{name}' returns {target} but has selections [...])"),
                        f.position,
                        Some(path),
                    ),
                    "selectionMismatch",
                    json!({"nodeName": format!("field '{name}'"), "typeName": target}),
                ));
            }
            return;
        }
        if f.selection_set.items.is_empty() {
            self.out.errors.push(coded(
                error(
                    format!("Field must have selections (field '{name}' returns {target} but has no selections. Did you mean '{name} {{ ... }}'?)"),
                    f.position,
                    Some(path),
                ),
                "selectionMismatch",
                json!({"nodeName": format!("field '{name}'"), "typeName": target}),
            ));
            return;
        }
        let mut child = multiplier;
        if is_connection(def.ty)
            && let Some(n) = self.page_size(f, path)
        {
            self.out.requests = self.out.requests.saturating_add(multiplier);
            child = multiplier.saturating_mul(n);
            self.out.nodes = self.out.nodes.saturating_add(child);
        }
        self.selection(target, &f.selection_set, path, child);
    }

    fn arguments(&mut self, f: &GField, def: &FieldDef, path: &[String]) {
        let name = f.name.as_str();
        for (arg, value) in &f.arguments {
            let Some((_, ty)) = def.args.iter().find(|(n, _)| n == arg) else {
                self.out.errors.push(coded(
                    error(
                        format!("Field '{name}' doesn't accept argument '{arg}'"),
                        f.position,
                        Some(path),
                    ),
                    "argumentNotAccepted",
                    json!({"name": name, "typeName": "Field", "argumentName": arg}),
                ));
                continue;
            };
            let message = match check_literal(value, ty, self.var_types) {
                Ok(()) => continue,
                Err(Problem::Literal) => {
                    format!(
                        "Argument '{arg}' on Field '{name}' has an invalid value ({value}). Expected type '{ty}'."
                    )
                }
                Err(Problem::Variable(var_ty)) => {
                    let mut vars = Vec::new();
                    variables_in(value, &mut vars);
                    let var = vars.first().cloned().unwrap_or_default();
                    format!("Type mismatch on variable ${var} and argument {arg} ({var_ty} / {ty})")
                }
                Err(Problem::Undeclared(var)) => {
                    format!(
                        "Variable ${var} is used by {} but not declared",
                        self.op_label
                    )
                }
            };
            self.out.errors.push(error(message, f.position, Some(path)));
        }
        let missing: Vec<&str> = def
            .args
            .iter()
            .filter(|(n, ty)| ty.ends_with('!') && !f.arguments.iter().any(|(a, _)| a == n))
            .map(|(n, _)| *n)
            .collect();
        if !missing.is_empty() {
            self.out.errors.push(coded(
                error(
                    format!(
                        "Field '{name}' is missing required arguments: {}",
                        missing.join(", ")
                    ),
                    f.position,
                    Some(path),
                ),
                "missingRequiredArguments",
                json!({"className": "Field", "name": name, "arguments": missing.join(", ")}),
            ));
        }
    }

    /// `first` or `last`, which must be given (one of them) and at most 100.
    fn page_size(&mut self, f: &GField, path: &[String]) -> Option<u64> {
        let name = f.name.as_str();
        let arg = |key: &str| {
            f.arguments
                .iter()
                .find(|(n, _)| n == key)
                .map(|(_, v)| to_json(v, self.vars))
                .filter(|v| !v.is_null())
        };
        let (which, value) = match (arg("first"), arg("last")) {
            (Some(_), Some(_)) => {
                self.out.errors.push(error(
                    format!("Passing both `first` and `last` to paginate the `{name}` connection is not supported."),
                    f.position,
                    Some(path),
                ));
                return None;
            }
            (None, None) => {
                self.out.errors.push(typed(
                    error(
                        format!("You must provide a `first` or `last` value to properly paginate the `{name}` connection."),
                        f.position,
                        Some(path),
                    ),
                    "MISSING_PAGINATION_BOUNDARIES",
                ));
                return None;
            }
            (Some(v), None) => ("first", v),
            (None, Some(v)) => ("last", v),
        };
        let n = value.as_i64()?;
        if n < 0 {
            self.out.errors.push(error(
                format!("`{which}` on the `{name}` connection cannot be less than zero."),
                f.position,
                Some(path),
            ));
            return None;
        }
        if n > 100 {
            self.out.errors.push(typed(
                error(
                    format!("Requesting {n} records on the `{name}` connection exceeds the `{which}` limit of 100 records."),
                    f.position,
                    Some(path),
                ),
                "EXCESSIVE_PAGINATION",
            ));
            return None;
        }
        if n == 0 {
            self.out.violations.push(format!(
                "`{which}: 0` on the `{name}` connection asks for nothing (use 1..=100)"
            ));
        }
        u64::try_from(n).ok()
    }
}

/// Every variable an operation mentions, through the fragments it spreads.
fn scan_vars(set: &GSet, fragments: &Fragments<'_>, into: &mut BTreeSet<String>, depth: usize) {
    if depth > 24 {
        return;
    }
    let mut names = Vec::new();
    for selection in &set.items {
        match selection {
            Selection::Field(f) => {
                f.arguments
                    .iter()
                    .for_each(|(_, v)| variables_in(v, &mut names));
                directive_vars(&f.directives, &mut names);
                scan_vars(&f.selection_set, fragments, into, depth + 1);
            }
            Selection::InlineFragment(inline) => {
                directive_vars(&inline.directives, &mut names);
                scan_vars(&inline.selection_set, fragments, into, depth + 1);
            }
            Selection::FragmentSpread(spread) => {
                directive_vars(&spread.directives, &mut names);
                if let Some(fragment) = fragments.map.get(spread.fragment_name.as_str()) {
                    scan_vars(&fragment.selection_set, fragments, into, depth + 1);
                }
            }
        }
    }
    into.extend(names);
}

fn directive_vars(
    directives: &[graphql_parser::query::Directive<'static, String>],
    into: &mut Vec<String>,
) {
    for d in directives {
        d.arguments
            .iter()
            .for_each(|(_, v): &(String, Gql<'static, String>)| variables_in(v, into));
    }
}
