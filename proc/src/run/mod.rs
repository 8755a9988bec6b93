//! A background run seen from outside its supervisor: waking the supervisor to a stop request
//! ([`wake`]), and signalling the run's programs ([`signal`]).

pub mod signal;
pub mod wake;
