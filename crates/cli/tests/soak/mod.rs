//! The soak test's parts: the agents under test and the churn they follow.

pub mod agents;
pub mod churn;
