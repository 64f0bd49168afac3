//! The vpa-recommender service.

pub mod plot;
pub mod replay;
