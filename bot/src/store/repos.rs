//! The repositories executors work in, as each announces them when it
//! starts (what `!queue --repo` may name and `!status` shows), and how a
//! run's setup phase went. Names and plain URLs only, never a credential.

use chrono::{DateTime, Utc};

use super::{QueryContext as _, Result, on_tx};

super::store_handle!(
    /// The repositories executors announced: `store.repos()`.
    Repos,
    repos
);

super::tx_handle!(
    /// The repositories executors announced, in a transaction: `tx.repos()`.
    ReposTx,
    repos
);

impl ReposTx<'_> {
    /// Every announced repository, by name.
    pub async fn list(&mut self) -> Result<Vec<AnnouncedRepo>> {
        on_tx!(self, conn => {
            sqlx::query_as::<_, AnnouncedRepo>(
                "SELECT name, url, github, base, executor, announced_at FROM repos ORDER BY name",
            )
            .fetch_all(conn)
            .await
        })
        .op("reading the repositories")
    }

    /// The names of the announced repositories (empty: no executor announced any yet).
    pub async fn names(&mut self) -> Result<Vec<String>> {
        on_tx!(self, conn => {
            sqlx::query_scalar("SELECT name FROM repos ORDER BY name")
                .fetch_all(conn)
                .await
        })
        .op("reading the repositories")
    }
}

/// A repository as an executor announced it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct AnnouncedRepo {
    /// What a task names.
    pub name: String,
    /// Where it is, without any credential.
    pub url: String,
    /// The PR loop's `owner/name`, if any.
    pub github: Option<String>,
    /// The branch its runs start from and their PRs go into.
    pub base: String,
    /// The executor profile that works in it.
    pub executor: String,
    pub announced_at: DateTime<Utc>,
}

impl Repos<'_> {
    /// Records the repositories `executor` works in, replacing what it
    /// announced before (`executor` and `announced_at` are set here).
    pub async fn announce(&self, executor: &str, repos: &[AnnouncedRepo]) -> Result<()> {
        let mut tx = self.begin_write().await?;
        let now = super::now();
        on_tx!(tx, conn => {
            sqlx::query("DELETE FROM repos WHERE executor = $1")
                .bind(executor)
                .execute(&mut *conn)
                .await
                .op("forgetting an executor's repositories")?;
            for repo in repos {
                sqlx::query(
                    "INSERT INTO repos (name, url, github, base, executor, announced_at) \
                     VALUES ($1, $2, $3, $6, $4, $5) \
                     ON CONFLICT (name) DO UPDATE SET url = $2, github = $3, executor = $4, \
                     announced_at = $5, base = $6",
                )
                .bind(&repo.name)
                .bind(&repo.url)
                .bind(&repo.github)
                .bind(executor)
                .bind(now)
                .bind(&repo.base)
                .execute(&mut *conn)
                .await
                .op("announcing a repository")?;
            }
            Ok::<(), super::StoreError>(())
        })?;
        tx.commit().await
    }

    /// Every announced repository, by name.
    pub async fn list(&self) -> Result<Vec<AnnouncedRepo>> {
        let mut tx = self.begin_read().await?;
        let rows = on_tx!(tx, conn => {
            sqlx::query_as::<_, AnnouncedRepo>(
                "SELECT name, url, github, base, executor, announced_at FROM repos ORDER BY name",
            )
            .fetch_all(&mut *conn)
            .await
            .op("reading the repositories")
        })?;
        tx.commit().await?;
        Ok(rows)
    }

    /// Records how run `run`'s setup phase went.
    pub async fn set_setup_outcome(&self, run: i64, outcome: &str) -> Result<()> {
        let mut tx = self.begin_write().await?;
        on_tx!(tx, conn => {
            sqlx::query("UPDATE executor_runs SET setup_outcome = $2 WHERE id = $1")
                .bind(run)
                .bind(outcome)
                .execute(&mut *conn)
                .await
                .map(|_| ())
                .op("recording a run's setup")
        })?;
        tx.commit().await
    }
}
