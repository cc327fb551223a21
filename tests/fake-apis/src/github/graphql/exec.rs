//! Running a validated operation against the fake's state: each object kind
//! resolves its fields, connections page with cursors the fake issues, and
//! a failure in a non-null field nulls its parent, as GraphQL requires.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};

use crate::common::clock::iso_seconds;
use crate::github::graphql::schema::field_of;
use crate::github::graphql::select::{Fragments, GField, GSet, collect};
use crate::github::graphql::values::to_json;
use crate::github::graphql::{error, typed};
use crate::github::model::Resource;
use crate::github::render::WEB;
use crate::github::state::State;

/// A page of a connection.
#[derive(Debug, Clone)]
struct Page {
    repo: usize,
    /// The thread a comment page belongs to (unused for thread pages).
    thread: usize,
    /// Indexes into the repository's threads, or the thread's comments.
    items: Vec<usize>,
    cursors: Vec<String>,
    has_next: bool,
    has_prev: bool,
    total: usize,
}

/// An object being resolved.
#[derive(Debug, Clone)]
enum Obj {
    Query,
    Mutation,
    Repo(usize),
    Pull(usize, u64),
    Threads(Page),
    ThreadEdge(usize, usize, String),
    Thread(usize, usize),
    Comments(Page),
    CommentEdge(usize, usize, usize, String),
    Comment(usize, usize, usize),
    Actor(String),
    PageInfo(Page),
    RateLimit,
    ReadyPayload(Option<(usize, u64)>, Value),
    ReplyPayload((usize, usize, usize), Value),
}

impl Obj {
    /// The concrete type name (`__typename`).
    fn type_name(&self) -> &'static str {
        match self {
            Obj::Query => "Query",
            Obj::Mutation => "Mutation",
            Obj::Repo(_) => "Repository",
            Obj::Pull(..) => "PullRequest",
            Obj::Threads(_) => "PullRequestReviewThreadConnection",
            Obj::ThreadEdge(..) => "PullRequestReviewThreadEdge",
            Obj::Thread(..) => "PullRequestReviewThread",
            Obj::Comments(_) => "PullRequestReviewCommentConnection",
            Obj::CommentEdge(..) => "PullRequestReviewCommentEdge",
            Obj::Comment(..) => "PullRequestReviewComment",
            Obj::Actor(login) if login.ends_with("[bot]") => "Bot",
            Obj::Actor(_) => "User",
            Obj::PageInfo(_) => "PageInfo",
            Obj::RateLimit => "RateLimit",
            Obj::ReadyPayload(..) => "MarkPullRequestReadyForReviewPayload",
            Obj::ReplyPayload(..) => "AddPullRequestReviewThreadReplyPayload",
        }
    }
}

/// What one field resolves to.
enum Resolved {
    Leaf(Value),
    Object(Obj),
    List(Vec<Obj>),
    /// An error was recorded: null, propagated if the field is non-null.
    Failed,
}

/// The executor of one operation.
pub(crate) struct Exec<'d, 's> {
    pub state: &'s mut State,
    pub login: String,
    /// The installation behind an installation token: it sees only its
    /// repositories.
    pub installation: Option<u64>,
    pub fragments: Fragments<'d>,
    pub vars: Map<String, Value>,
    pub errors: Vec<Value>,
    pub violations: Vec<String>,
    pub cost: u64,
    pub nodes: u64,
}

impl<'d> Exec<'d, '_> {
    /// Runs a query or mutation; `None` when a root field failed non-null.
    pub fn run(&mut self, mutation: bool, set: &'d GSet) -> Value {
        let root = if mutation { Obj::Mutation } else { Obj::Query };
        let mut path = Vec::new();
        self.object(&root, set, &mut path).unwrap_or(Value::Null)
    }

    fn object(&mut self, obj: &Obj, set: &'d GSet, path: &mut Vec<Value>) -> Option<Value> {
        let type_name = obj.type_name();
        let mut ignored = Vec::new();
        let fields = collect(
            type_name,
            set,
            &mut self.fragments,
            &self.vars,
            &mut ignored,
        );
        let mut out = Map::new();
        // The object's own type answers every field (a fragment that did
        // not apply to it was left out).
        for (_, f) in fields {
            let key = f.alias.as_ref().unwrap_or(&f.name).clone();
            if f.name == "__typename" {
                out.insert(key, json!(type_name));
                continue;
            }
            let Some(def) = field_of(type_name, &f.name) else {
                continue;
            };
            path.push(json!(key));
            let value = self.value(obj, f, def.ty, path);
            path.pop();
            match value {
                Some(v) => {
                    out.insert(key, v);
                }
                None if def.ty.ends_with('!') => return None,
                None => {
                    out.insert(key, Value::Null);
                }
            }
        }
        Some(Value::Object(out))
    }

    fn value(
        &mut self,
        obj: &Obj,
        f: &'d GField,
        ty: &str,
        path: &mut Vec<Value>,
    ) -> Option<Value> {
        match self.resolve(obj, f, path) {
            Resolved::Leaf(v) => Some(v),
            Resolved::Failed => None,
            Resolved::Object(child) => self.object(&child, &f.selection_set, path),
            Resolved::List(items) => {
                let item_non_null = ty.contains("!]");
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    path.push(json!(i));
                    let v = self.object(item, &f.selection_set, path);
                    path.pop();
                    match v {
                        Some(v) => out.push(v),
                        None if item_non_null => return None,
                        None => out.push(Value::Null),
                    }
                }
                Some(Value::Array(out))
            }
        }
    }

    fn arg(&self, f: &GField, name: &str) -> Value {
        f.arguments
            .iter()
            .find(|(n, _)| n == name)
            .map_or(Value::Null, |(_, v)| to_json(v, &self.vars))
    }

    fn fail(
        &mut self,
        kind: Option<&str>,
        message: String,
        f: &GField,
        path: &[Value],
    ) -> Resolved {
        let mut e = error(message, f.position, None);
        e["path"] = Value::Array(path.to_vec());
        self.errors.push(match kind {
            Some(kind) => typed(e, kind),
            None => e,
        });
        Resolved::Failed
    }

    fn resolve(&mut self, obj: &Obj, f: &GField, path: &[Value]) -> Resolved {
        let name = f.name.as_str();
        match obj {
            Obj::Query => self.query(f, path),
            Obj::Mutation => self.mutation(f, path),
            Obj::Repo(r) => self.repository(*r, f, path),
            Obj::Pull(r, n) => self.pull(*r, *n, f, path),
            Obj::Threads(page) | Obj::Comments(page) => {
                let threads = matches!(obj, Obj::Threads(_));
                match name {
                    "totalCount" => Resolved::Leaf(json!(page.total)),
                    "pageInfo" => Resolved::Object(Obj::PageInfo(page.clone())),
                    "nodes" => Resolved::List(
                        page.items
                            .iter()
                            .map(|i| {
                                if threads {
                                    Obj::Thread(page.repo, *i)
                                } else {
                                    Obj::Comment(page.repo, page.thread, *i)
                                }
                            })
                            .collect(),
                    ),
                    _ => Resolved::List(
                        page.items
                            .iter()
                            .zip(&page.cursors)
                            .map(|(i, c)| {
                                if threads {
                                    Obj::ThreadEdge(page.repo, *i, c.clone())
                                } else {
                                    Obj::CommentEdge(page.repo, page.thread, *i, c.clone())
                                }
                            })
                            .collect(),
                    ),
                }
            }
            Obj::ThreadEdge(r, t, cursor) => match name {
                "cursor" => Resolved::Leaf(json!(cursor)),
                _ => Resolved::Object(Obj::Thread(*r, *t)),
            },
            Obj::CommentEdge(r, t, c, cursor) => match name {
                "cursor" => Resolved::Leaf(json!(cursor)),
                _ => Resolved::Object(Obj::Comment(*r, *t, *c)),
            },
            Obj::Thread(r, t) => self.thread(*r, *t, f, path),
            Obj::Comment(r, t, c) => self.comment(*r, *t, *c, name),
            Obj::Actor(login) => Resolved::Leaf(json!(login)),
            Obj::PageInfo(page) => Resolved::Leaf(match name {
                "hasNextPage" => json!(page.has_next),
                "hasPreviousPage" => json!(page.has_prev),
                "endCursor" => json!(page.cursors.last()),
                _ => json!(page.cursors.first()),
            }),
            Obj::RateLimit => {
                let budget = self.state.quotas.budget(Resource::GraphQl).clone();
                Resolved::Leaf(match name {
                    "cost" => json!(self.cost),
                    "limit" => json!(budget.limit),
                    "nodeCount" => json!(self.nodes),
                    "remaining" => json!(budget.remaining()),
                    "used" => json!(budget.used.min(budget.limit)),
                    _ => json!(iso_seconds(budget.reset_at.saturating_mul(1000))),
                })
            }
            Obj::ReplyPayload((r, t, c), client_id) => match name {
                "clientMutationId" => Resolved::Leaf(client_id.clone()),
                _ => Resolved::Object(Obj::Comment(*r, *t, *c)),
            },
            Obj::ReadyPayload(pull, client_id) => match (name, pull) {
                ("clientMutationId", _) => Resolved::Leaf(client_id.clone()),
                (_, Some((r, n))) => Resolved::Object(Obj::Pull(*r, *n)),
                (_, None) => Resolved::Leaf(Value::Null),
            },
        }
    }

    fn query(&mut self, f: &GField, path: &[Value]) -> Resolved {
        match f.name.as_str() {
            "repository" => {
                let owner = self.arg(f, "owner");
                let name = self.arg(f, "name");
                let (owner, name) = (owner.as_str().unwrap_or(""), name.as_str().unwrap_or(""));
                match self
                    .state
                    .repo_index(owner, name)
                    .filter(|r| self.visible(*r))
                {
                    Some(r) => Resolved::Object(Obj::Repo(r)),
                    None => self.fail(
                        Some("NOT_FOUND"),
                        format!(
                            "Could not resolve to a Repository with the name '{owner}/{name}'."
                        ),
                        f,
                        path,
                    ),
                }
            }
            "rateLimit" => Resolved::Object(Obj::RateLimit),
            "node" => {
                let id = self.arg(f, "id");
                let id = id.as_str().unwrap_or("");
                match self.find_thread(id) {
                    Some((r, t)) => Resolved::Object(Obj::Thread(r, t)),
                    None => self.fail(
                        Some("NOT_FOUND"),
                        format!("Could not resolve to a node with the global id of '{id}'"),
                        f,
                        path,
                    ),
                }
            }
            _ => Resolved::Object(Obj::Actor(self.login.clone())),
        }
    }

    /// The review thread with GraphQL id `id`: (repository, thread).
    fn find_thread(&self, id: &str) -> Option<(usize, usize)> {
        self.state.repos.iter().enumerate().find_map(|(r, repo)| {
            repo.threads
                .iter()
                .position(|t| t.node_id == id)
                .map(|t| (r, t))
                .filter(|_| self.visible(r))
        })
    }

    /// Whether the caller may see the repository at index `r` (an
    /// installation sees only its own).
    fn visible(&self, r: usize) -> bool {
        self.installation.is_none_or(|i| {
            crate::github::apps::holds_named(self.state, i, &self.state.repos[r].full_name())
        })
    }

    /// `addPullRequestReviewThreadReply`: a reply by the token's user.
    fn reply(&mut self, f: &GField, path: &[Value]) -> Resolved {
        let input = self.arg(f, "input");
        let id = input["pullRequestReviewThreadId"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        let body = input["body"].as_str().unwrap_or("").to_owned();
        let client_id = input
            .get("clientMutationId")
            .cloned()
            .unwrap_or(Value::Null);
        let Some((r, t)) = self.find_thread(&id) else {
            return self.fail(
                Some("NOT_FOUND"),
                format!("Could not resolve to a node with the global id of '{id}'."),
                f,
                path,
            );
        };
        if body.trim().is_empty() {
            return self.fail(
                Some("UNPROCESSABLE"),
                "Body can't be blank".to_owned(),
                f,
                path,
            );
        }
        let full = self.state.repos[r].full_name();
        let pull = self.state.repos[r].threads[t].pull;
        let first = self.state.repos[r].threads[t]
            .comments
            .first()
            .map(|c| c.id);
        let login = self.login.clone();
        let comment = crate::github::control::new_review_comment(
            self.state,
            &full,
            pull,
            Some(&login),
            &body,
            first,
        );
        let thread = &mut self.state.repos[r].threads[t];
        thread.comments.push(comment);
        let c = thread.comments.len() - 1;
        Resolved::Object(Obj::ReplyPayload((r, t, c), client_id))
    }

    fn mutation(&mut self, f: &GField, path: &[Value]) -> Resolved {
        if f.name == "addPullRequestReviewThreadReply" {
            return self.reply(f, path);
        }
        let input = self.arg(f, "input");
        let id = input["pullRequestId"].as_str().unwrap_or("").to_owned();
        let client_id = input
            .get("clientMutationId")
            .cloned()
            .unwrap_or(Value::Null);
        let found = self.state.repos.iter().enumerate().find_map(|(r, repo)| {
            repo.pulls
                .values()
                .find(|p| p.node_id == id)
                .map(|p| (r, p.number))
        });
        let Some((r, n)) = found else {
            return self.fail(
                Some("NOT_FOUND"),
                format!("Could not resolve to a node with the global id of '{id}'."),
                f,
                path,
            );
        };
        let now = self.state.clock.now_ms();
        if let Some(p) = self.state.repos[r].pulls.get_mut(&n) {
            p.draft = false;
            p.updated_at = now;
        }
        Resolved::Object(Obj::ReadyPayload(Some((r, n)), client_id))
    }

    fn repository(&mut self, r: usize, f: &GField, path: &[Value]) -> Resolved {
        let repo = &self.state.repos[r];
        Resolved::Leaf(match f.name.as_str() {
            "id" => json!(repo.node_id),
            "name" => json!(repo.name),
            "nameWithOwner" => json!(repo.full_name()),
            _ => {
                let number = self.arg(f, "number").as_u64().unwrap_or(0);
                if repo.pulls.contains_key(&number) {
                    return Resolved::Object(Obj::Pull(r, number));
                }
                return self.fail(
                    Some("NOT_FOUND"),
                    format!("Could not resolve to a PullRequest with the number of {number}."),
                    f,
                    path,
                );
            }
        })
    }

    fn pull(&mut self, r: usize, n: u64, f: &GField, path: &[Value]) -> Resolved {
        let repo = &self.state.repos[r];
        let Some(p) = repo.pulls.get(&n) else {
            return Resolved::Leaf(Value::Null);
        };
        Resolved::Leaf(match f.name.as_str() {
            "id" => json!(p.node_id),
            "number" => json!(p.number),
            "title" => json!(p.title),
            "url" => json!(format!("{WEB}/{}/pull/{n}", repo.full_name())),
            "isDraft" => json!(p.draft),
            "merged" => json!(p.merged.is_some()),
            "state" => json!(match (&p.merged, p.closed) {
                (Some(_), _) => "MERGED",
                (None, true) => "CLOSED",
                (None, false) => "OPEN",
            }),
            "headRefOid" => json!(p.head_sha),
            "headRefName" => json!(p.head_ref),
            // The fork the head is in, or the repository itself.
            "headRepository" => {
                let fork = p
                    .head_repo
                    .as_deref()
                    .map(|f| f.split_once('/').unwrap_or((f, "")));
                let index = match fork {
                    None => Some(r),
                    Some((owner, name)) => self.state.repo_index(owner, name),
                };
                return match index {
                    Some(i) => Resolved::Object(Obj::Repo(i)),
                    None => Resolved::Leaf(Value::Null),
                };
            }
            "baseRefName" => json!(p.base_ref),
            _ => {
                let key = format!("threads.{}", p.node_id);
                let items: Vec<usize> = repo
                    .threads
                    .iter()
                    .enumerate()
                    .filter(|(_, t)| t.pull == n)
                    .map(|(i, _)| i)
                    .collect();
                return match self.page(&key, items, r, 0, f, path) {
                    Ok(page) => Resolved::Object(Obj::Threads(page)),
                    Err(failed) => failed,
                };
            }
        })
    }

    fn thread(&mut self, r: usize, t: usize, f: &GField, path: &[Value]) -> Resolved {
        let thread = &self.state.repos[r].threads[t];
        Resolved::Leaf(match f.name.as_str() {
            "id" => json!(thread.node_id),
            "isResolved" => json!(thread.resolved),
            "isOutdated" => json!(thread.outdated),
            "path" => json!(thread.path),
            "line" => json!(if thread.outdated { None } else { thread.line }),
            _ => {
                let key = format!("comments.{}", thread.node_id);
                let items: Vec<usize> = (0..thread.comments.len()).collect();
                return match self.page(&key, items, r, t, f, path) {
                    Ok(page) => Resolved::Object(Obj::Comments(page)),
                    Err(failed) => failed,
                };
            }
        })
    }

    fn comment(&mut self, r: usize, t: usize, c: usize, name: &str) -> Resolved {
        let repo = &self.state.repos[r];
        let thread = &repo.threads[t];
        let comment = &thread.comments[c];
        match name {
            "author" => match &comment.login {
                Some(login) => Resolved::Object(Obj::Actor(login.clone())),
                None => Resolved::Leaf(Value::Null),
            },
            other => Resolved::Leaf(match other {
                "authorAssociation" => json!(repo.association(comment.login.as_deref())),
                "id" => json!(comment.node_id),
                "databaseId" => json!(comment.id),
                "body" => json!(comment.body),
                "createdAt" => json!(iso_seconds(comment.created_at)),
                "url" => json!(format!(
                    "{WEB}/{}/pull/{}#discussion_r{}",
                    repo.full_name(),
                    thread.pull,
                    comment.id
                )),
                "path" => json!(thread.path),
                _ => json!(thread.outdated),
            }),
        }
    }

    /// Pages `items` by `first`/`last`/`after`/`before`/`skip`; cursors are
    /// issued here and only issued ones are accepted back.
    fn page(
        &mut self,
        key: &str,
        items: Vec<usize>,
        repo: usize,
        thread: usize,
        f: &GField,
        path: &[Value],
    ) -> Result<Page, Resolved> {
        let total = items.len();
        let mut start = 0;
        let mut end = total;
        for (arg, is_after) in [("after", true), ("before", false)] {
            let Some(cursor) = self.arg(f, arg).as_str().map(str::to_owned) else {
                continue;
            };
            match self.decode(&cursor, key) {
                Some(i) if is_after => start = (i + 1).min(total),
                Some(i) => end = i.min(total),
                None => {
                    self.violations.push(format!(
                        "`{arg}` cursor {cursor:?} was never issued for this connection"
                    ));
                    return Err(self.fail(
                        Some("INVALID_CURSOR_ARGUMENTS"),
                        format!("`{cursor}` does not appear to be a valid cursor."),
                        f,
                        path,
                    ));
                }
            }
        }
        let skip = self.arg(f, "skip").as_u64().unwrap_or(0);
        start = start
            .saturating_add(usize::try_from(skip).unwrap_or(usize::MAX))
            .min(end.max(start));
        end = end.max(start);
        let to_count = |v: Value| v.as_u64().and_then(|n| usize::try_from(n).ok());
        if let Some(n) = to_count(self.arg(f, "first")) {
            end = end.min(start.saturating_add(n));
        } else if let Some(n) = to_count(self.arg(f, "last")) {
            start = start.max(end.saturating_sub(n));
        }
        let cursors: Vec<String> = (start..end)
            .map(|i| {
                let cursor = STANDARD.encode(format!("cursor:v2:{key}:{i}"));
                self.state.cursors.insert(cursor.clone());
                cursor
            })
            .collect();
        Ok(Page {
            repo,
            thread,
            items: items[start..end].to_vec(),
            cursors,
            has_next: end < total,
            has_prev: start > 0,
            total,
        })
    }

    fn decode(&self, cursor: &str, key: &str) -> Option<usize> {
        if !self.state.cursors.contains(cursor) {
            return None;
        }
        let text = String::from_utf8(STANDARD.decode(cursor).ok()?).ok()?;
        text.strip_prefix(&format!("cursor:v2:{key}:"))?
            .parse()
            .ok()
    }
}
