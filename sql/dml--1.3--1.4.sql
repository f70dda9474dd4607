/* dml 1.3 -> 1.4 */

\echo Use "ALTER EXTENSION dml UPDATE TO '1.4'" to load this file. \quit

/*
 * Each issue's schema changes after 1.3 (the third wave's second release),
 * in the order they landed, each section opened by a comment naming its
 * issue.  sql/dml.sql is the whole 1.4 install script; regress/t/upgrade.sh
 * checks that installs updated from 1.0, 1.1, 1.2 and 1.3 have the same
 * objects as a fresh one.
 */
