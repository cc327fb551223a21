//! The hand-written subset of GitHub's public GraphQL schema that the fake
//! serves (`schema.docs.graphql` in github/docs): the types, fields and
//! arguments Eagle uses, with the types GitHub gives them.

/// One output field: its name, its type in SDL notation, and its arguments
/// as (name, type) pairs.
#[derive(Debug)]
pub(crate) struct FieldDef {
    pub name: &'static str,
    pub ty: &'static str,
    pub args: &'static [(&'static str, &'static str)],
}

const fn field(name: &'static str, ty: &'static str) -> FieldDef {
    FieldDef {
        name,
        ty,
        args: &[],
    }
}

const PAGE_ARGS: &[(&str, &str)] = &[
    ("after", "String"),
    ("before", "String"),
    ("first", "Int"),
    ("last", "Int"),
];

const QUERY: &[FieldDef] = &[
    FieldDef {
        name: "repository",
        ty: "Repository",
        args: &[
            ("owner", "String!"),
            ("name", "String!"),
            ("followRenames", "Boolean"),
        ],
    },
    field("rateLimit", "RateLimit"),
    field("viewer", "User!"),
    FieldDef {
        name: "node",
        ty: "Node",
        args: &[("id", "ID!")],
    },
];

const MUTATION: &[FieldDef] = &[
    FieldDef {
        name: "markPullRequestReadyForReview",
        ty: "MarkPullRequestReadyForReviewPayload",
        args: &[("input", "MarkPullRequestReadyForReviewInput!")],
    },
    FieldDef {
        name: "addPullRequestReviewThreadReply",
        ty: "AddPullRequestReviewThreadReplyPayload",
        args: &[("input", "AddPullRequestReviewThreadReplyInput!")],
    },
];

/// The `Node` interface: every object with a global id.
const NODE: &[FieldDef] = &[field("id", "ID!")];

const REPOSITORY: &[FieldDef] = &[
    field("id", "ID!"),
    field("name", "String!"),
    field("nameWithOwner", "String!"),
    FieldDef {
        name: "pullRequest",
        ty: "PullRequest",
        args: &[("number", "Int!")],
    },
];

const PULL_REQUEST: &[FieldDef] = &[
    field("id", "ID!"),
    field("number", "Int!"),
    field("title", "String!"),
    field("url", "URI!"),
    field("isDraft", "Boolean!"),
    field("merged", "Boolean!"),
    field("state", "PullRequestState!"),
    field("headRefOid", "GitObjectID!"),
    field("headRefName", "String!"),
    field("headRepository", "Repository"),
    field("baseRefName", "String!"),
    FieldDef {
        name: "reviewThreads",
        ty: "PullRequestReviewThreadConnection!",
        args: PAGE_ARGS,
    },
];

const THREAD_CONNECTION: &[FieldDef] = &[
    field("nodes", "[PullRequestReviewThread]"),
    field("edges", "[PullRequestReviewThreadEdge]"),
    field("pageInfo", "PageInfo!"),
    field("totalCount", "Int!"),
];

const THREAD_EDGE: &[FieldDef] = &[
    field("cursor", "String!"),
    field("node", "PullRequestReviewThread"),
];

const THREAD: &[FieldDef] = &[
    field("id", "ID!"),
    field("isResolved", "Boolean!"),
    field("isOutdated", "Boolean!"),
    field("path", "String!"),
    field("line", "Int"),
    FieldDef {
        name: "comments",
        ty: "PullRequestReviewCommentConnection!",
        args: &[
            ("after", "String"),
            ("before", "String"),
            ("first", "Int"),
            ("last", "Int"),
            ("skip", "Int"),
        ],
    },
];

const COMMENT_CONNECTION: &[FieldDef] = &[
    field("nodes", "[PullRequestReviewComment]"),
    field("edges", "[PullRequestReviewCommentEdge]"),
    field("pageInfo", "PageInfo!"),
    field("totalCount", "Int!"),
];

const COMMENT_EDGE: &[FieldDef] = &[
    field("cursor", "String!"),
    field("node", "PullRequestReviewComment"),
];

const COMMENT: &[FieldDef] = &[
    field("id", "ID!"),
    field("databaseId", "Int"),
    field("author", "Actor"),
    field("authorAssociation", "CommentAuthorAssociation!"),
    field("body", "String!"),
    field("createdAt", "DateTime!"),
    field("url", "URI!"),
    field("path", "String!"),
    field("outdated", "Boolean!"),
];

const ACTOR: &[FieldDef] = &[field("login", "String!")];

const PAGE_INFO: &[FieldDef] = &[
    field("hasNextPage", "Boolean!"),
    field("hasPreviousPage", "Boolean!"),
    field("endCursor", "String"),
    field("startCursor", "String"),
];

const RATE_LIMIT: &[FieldDef] = &[
    field("cost", "Int!"),
    field("limit", "Int!"),
    field("nodeCount", "Int!"),
    field("remaining", "Int!"),
    field("resetAt", "DateTime!"),
    field("used", "Int!"),
];

const REPLY_PAYLOAD: &[FieldDef] = &[
    field("clientMutationId", "String"),
    field("comment", "PullRequestReviewComment"),
];

const READY_PAYLOAD: &[FieldDef] = &[
    field("clientMutationId", "String"),
    field("pullRequest", "PullRequest"),
];

/// The fields of an output type (object or interface).
pub(crate) fn fields_of(type_name: &str) -> Option<&'static [FieldDef]> {
    Some(match type_name {
        "Query" => QUERY,
        "Mutation" => MUTATION,
        "Repository" => REPOSITORY,
        "PullRequest" => PULL_REQUEST,
        "PullRequestReviewThreadConnection" => THREAD_CONNECTION,
        "PullRequestReviewThreadEdge" => THREAD_EDGE,
        "PullRequestReviewThread" => THREAD,
        "PullRequestReviewCommentConnection" => COMMENT_CONNECTION,
        "PullRequestReviewCommentEdge" => COMMENT_EDGE,
        "PullRequestReviewComment" => COMMENT,
        "Actor" | "User" | "Bot" => ACTOR,
        "PageInfo" => PAGE_INFO,
        "RateLimit" => RATE_LIMIT,
        "MarkPullRequestReadyForReviewPayload" => READY_PAYLOAD,
        "AddPullRequestReviewThreadReplyPayload" => REPLY_PAYLOAD,
        "Node" => NODE,
        _ => return None,
    })
}

/// One field of an output type.
pub(crate) fn field_of(type_name: &str, name: &str) -> Option<&'static FieldDef> {
    fields_of(type_name)?.iter().find(|f| f.name == name)
}

/// Whether a type is a leaf (scalar or enum).
pub(crate) fn is_leaf(type_name: &str) -> bool {
    matches!(
        type_name,
        "String"
            | "Int"
            | "Boolean"
            | "ID"
            | "GitObjectID"
            | "DateTime"
            | "URI"
            | "PullRequestState"
            | "CommentAuthorAssociation"
    )
}

/// The fields of an input object: (name, type).
pub(crate) fn input_fields(type_name: &str) -> Option<&'static [(&'static str, &'static str)]> {
    match type_name {
        "MarkPullRequestReadyForReviewInput" => {
            Some(&[("clientMutationId", "String"), ("pullRequestId", "ID!")])
        }
        "AddPullRequestReviewThreadReplyInput" => Some(&[
            ("body", "String!"),
            ("clientMutationId", "String"),
            ("pullRequestReviewId", "ID"),
            ("pullRequestReviewThreadId", "ID!"),
        ]),
        _ => None,
    }
}

/// Whether a fragment on `condition` applies inside `type_name`.
pub(crate) fn applies(condition: &str, type_name: &str) -> bool {
    /// The types that implement `Node` here.
    const NODES: &[&str] = &[
        "PullRequest",
        "PullRequestReviewThread",
        "PullRequestReviewComment",
        "Repository",
        "User",
        "Bot",
    ];
    condition == type_name
        || (type_name == "Node" && NODES.contains(&condition))
        || (condition == "Node" && NODES.contains(&type_name))
        || (condition == "Actor" && matches!(type_name, "User" | "Bot"))
        || (type_name == "Actor" && matches!(condition, "User" | "Bot"))
}

/// The named type inside `[T!]!` and friends.
pub(crate) fn base(ty: &str) -> &str {
    ty.trim_matches(|c| c == '[' || c == ']' || c == '!')
}

/// Whether a connection field needs `first` or `last`.
pub(crate) fn is_connection(ty: &str) -> bool {
    base(ty).ends_with("Connection")
}
