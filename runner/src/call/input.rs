//! The input calls write to their programs' stdin, held within one budget for the whole
//! server: each call's `input` may be as long as a request line (16 MiB), and 128 calls at once
//! would otherwise hold 2 GiB. A call's input is taken out of its request (never copied
//! whole), held in chunks, and each chunk is freed, and its bytes given back to the budget, as
//! soon as it has been written.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use crate::sync::lock;

/// The input all calls of one server may hold at once.
pub const HELD_AT_ONCE: u64 = 64 * 1024 * 1024;
/// The piece of input freed at a time.
const CHUNK: usize = 1024 * 1024;

/// How much input the calls in flight hold, against the limit.
#[derive(Debug)]
pub struct InputBudget {
    held: Mutex<u64>,
    limit: u64,
}

/// Why a call's input could not be taken.
#[derive(Debug, thiserror::Error)]
#[error(
    "the calls running now hold {held} bytes of input, and this call's {wanted} would pass the \
     {limit} bytes this server holds at once; wait for some calls to end, or write the input \
     to a file in the files folder and pass its name"
)]
pub struct InputRefused {
    held: u64,
    wanted: u64,
    limit: u64,
}

impl InputBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: u64) -> Arc<Self> {
        Arc::new(Self {
            held: Mutex::new(0),
            limit,
        })
    }

    /// Takes `text` as a call's input, or refuses it when it would not fit.
    pub fn take(self: &Arc<Self>, text: String) -> Result<Input, InputRefused> {
        let wanted = text.len() as u64;
        {
            let mut held = lock(&self.held);
            if held.saturating_add(wanted) > self.limit {
                return Err(InputRefused {
                    held: *held,
                    wanted,
                    limit: self.limit,
                });
            }
            *held += wanted;
        }
        let bytes = text.into_bytes();
        let chunks = if bytes.len() <= CHUNK {
            VecDeque::from([bytes])
        } else {
            bytes.chunks(CHUNK).map(<[u8]>::to_vec).collect()
        };
        Ok(Input {
            chunks,
            at: 0,
            budget: Arc::clone(self),
        })
    }

    /// The bytes held now.
    #[cfg(test)]
    pub fn held(&self) -> u64 {
        *lock(&self.held)
    }

    fn give_back(&self, bytes: usize) {
        let mut held = lock(&self.held);
        *held = held.saturating_sub(bytes as u64);
    }
}

/// One call's input, not yet written.
#[derive(Debug)]
pub struct Input {
    chunks: VecDeque<Vec<u8>>,
    /// How much of the first chunk is written.
    at: usize,
    budget: Arc<InputBudget>,
}

impl Input {
    /// The bytes to write next.
    pub fn pending(&self) -> &[u8] {
        self.chunks.front().map_or(&[], |chunk| &chunk[self.at..])
    }

    /// `written` bytes of [`Input::pending`] were written: a chunk written whole is freed.
    pub fn advance(&mut self, written: usize) {
        self.at += written;
        while let Some(chunk) = self.chunks.front() {
            if self.at < chunk.len() {
                break;
            }
            self.at -= chunk.len();
            let len = chunk.len();
            self.chunks.pop_front();
            self.budget.give_back(len);
        }
    }

    /// Whether everything was written.
    pub fn is_done(&self) -> bool {
        self.chunks.is_empty()
    }
}

impl Drop for Input {
    fn drop(&mut self) {
        // A chunk's bytes are given back when the whole chunk is freed, so every chunk still
        // held counts whole, the one being written included.
        let left: usize = self.chunks.iter().map(Vec::len).sum();
        self.budget.give_back(left);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_is_given_back_as_it_is_written() {
        let budget = InputBudget::new(10 * CHUNK as u64);
        let text = "x".repeat(2 * CHUNK + 5);
        let mut input = budget.take(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(budget.held(), 2 * CHUNK as u64 + 5);
        assert_eq!(input.pending().len(), CHUNK);
        input.advance(CHUNK - 1);
        assert_eq!(
            budget.held(),
            2 * CHUNK as u64 + 5,
            "a chunk is freed whole"
        );
        input.advance(1);
        assert_eq!(budget.held(), CHUNK as u64 + 5);
        input.advance(CHUNK);
        assert_eq!(input.pending(), b"xxxxx");
        input.advance(5);
        assert!(input.is_done());
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn what_a_call_did_not_write_is_given_back_when_it_ends() {
        let budget = InputBudget::new(100);
        let mut input = budget
            .take("0123456789".into())
            .unwrap_or_else(|e| panic!("{e}"));
        input.advance(3);
        drop(input);
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn input_past_the_budget_is_refused() {
        let budget = InputBudget::new(10);
        let held = budget
            .take("123456".into())
            .unwrap_or_else(|e| panic!("{e}"));
        let refused = budget
            .take("12345".into())
            .err()
            .unwrap_or_else(|| panic!("refused"));
        assert!(refused.to_string().contains("6 bytes"), "{refused}");
        assert!(budget.take("1234".into()).is_ok(), "what fits is taken");
        drop(held);
        assert!(budget.take("1234567890".into()).is_ok());
    }
}
