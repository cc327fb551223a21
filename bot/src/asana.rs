//! Asana over its REST API: importing tasks into the inbox and posting
//! approved comments exactly once.
