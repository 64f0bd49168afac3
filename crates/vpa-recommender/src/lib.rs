//! The vpa-recommender service.
