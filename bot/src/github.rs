//! GitHub over its REST and GraphQL APIs: the client the PR loop and the
//! merger use (no `gh` at run time).
