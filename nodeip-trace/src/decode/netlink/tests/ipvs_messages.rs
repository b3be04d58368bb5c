//! IPVS byte fixtures.
