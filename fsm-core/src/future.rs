//! [`BoxFuture`]: the boxed futures of the machine's dispatch methods, its
//! clock and its stores.

use std::future::Future;
use std::pin::Pin;

/// A boxed, `Send` future, as returned by the dispatch methods of
/// [`Fsm`](crate::Fsm).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
