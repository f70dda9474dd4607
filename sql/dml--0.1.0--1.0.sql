/* dml 0.1.0 -> 1.0: the same schema, renumbered as the first stable release */

\echo Use "ALTER EXTENSION dml UPDATE TO '1.0'" to load this file. \quit
