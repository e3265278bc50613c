"""Layer: featsel. Private feature selection: pi_MS-GINI, pi_FILTER-FS, pi_GINI-FS."""
