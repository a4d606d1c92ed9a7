// Package budget owns delegated spending limits: accounts, holds, the
// within-limit decision and the verifier's rules.
//
// An account is the fold of its events (LimitSet, Reserved, Denied, Settled,
// Released). Every decision is a pure function of (account, command) that
// returns the event to append; nothing here mutates the account it decides
// on. The caller appends the event with compare-and-set on the account's
// subject, using the event's AccountVersion as the expected version, and then
// folds it with Account.Apply. Apply checks the event again (Validate before
// append, Apply after read), so a stale or inconsistent event never enters
// the state.
//
// The rule, from docs/design.md §3:
//
//	within_limit = spent + sum(held) + requested <= limit
//
// Retries are recognised by the operation key, never by the request digest:
// two requests with the same content but different keys are two payments
// and both are counted. A hold is moved only by a later record of the same
// operation: Settled (effect confirmed, with evidence) or Released (absence
// proven, with evidence). A lost answer moves nothing.
//
// Every decision, allowed or denied, records what it saw (account version,
// spent, held total and held list, limit and limit digest) so that Verify can
// replay a stream and point at any decision whose arithmetic, held list or
// read version does not match the stream.
//
// This is pure domain code: it does no I/O, never logs, and must not import
// NATS, Pebble, Connect or protobuf (checked by TestDomainImports).
package budget
