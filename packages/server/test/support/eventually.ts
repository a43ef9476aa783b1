// The repository's one polling helper, under the path the server's tests import it from.
export { eventually } from "../../../../test/support/eventually.ts";
