//! vpa-recommender's integration tests as one binary: the deploy arguments and the replay scenarios.

mod deploy_args;
mod scenarios;
