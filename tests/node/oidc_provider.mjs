// A real OpenID provider for the single sign-on tests: oidc-provider (OpenID Certified), configured
// the way BooCode is meant to be registered at any provider.
//
//   node oidc_provider.mjs SETTINGS.json
//
// SETTINGS.json: {"port": 17001, "issuer": "http://localhost:17001", "accounts": "ACCOUNTS.json",
//                 "clients": [{client_id, client_secret, redirect_uris, post_logout_redirect_uris}]}
// ACCOUNTS.json: {"<login>": {"email": ..., "email_verified": true, "groups": [...], ...}}, read again
// at every sign-in so that a test can change a person's claims between two sign-ins. Any login
// signs in (the provider's development login page asks for a login and ignores the password);
// one that is not in the file has no claims but its subject.
//
// What the tests rely on: PKCE is required of every client; the ID token carries the scopes'
// claims and the groups (conformIdTokenClaims off, as Keycloak, Entra ID or Okta do); a refresh
// token is issued to clients allowed the refresh_token grant; RP-Initiated Logout is on. Keys are
// made at start, so each run signs with its own.
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";

import Provider from "oidc-provider";

const settings = JSON.parse(readFileSync(process.argv[2], "utf8"));

function account(login) {
  const accounts = JSON.parse(readFileSync(settings.accounts, "utf8"));
  return accounts[login] ?? {};
}

const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: "jwk" }), kid: randomBytes(8).toString("hex"), use: "sig", alg: "RS256" };

const provider = new Provider(settings.issuer, {
  clients: settings.clients.map((client) => ({
    grant_types: ["authorization_code", "refresh_token"],
    response_types: ["code"],
    token_endpoint_auth_method: "client_secret_basic",
    ...client,
  })),
  pkce: { required: () => true },
  conformIdTokenClaims: false,
  claims: {
    openid: ["sub", "groups"],
    email: ["email", "email_verified"],
    profile: ["name", "preferred_username", "given_name", "family_name"],
  },
  async findAccount(ctx, sub) {
    return {
      accountId: sub,
      async claims() {
        return { ...account(sub), sub };
      },
    };
  },
  async issueRefreshToken(ctx, client) {
    return client.grantTypeAllowed("refresh_token");
  },
  ttl: { IdToken: Number(settings.id_token_ttl ?? 3600) },
  cookies: { keys: [randomBytes(32).toString("hex")] },
  jwks: { keys: [signingKey] },
  features: {
    devInteractions: { enabled: true },
    rpInitiatedLogout: {
      enabled: true,
      // Plain pages (the defaults fetch a web font, which the tests' machines cannot reach).
      async logoutSource(ctx, form) {
        ctx.body = `<!DOCTYPE html><title>Sign out</title><h1>Sign out of the provider?</h1>${form}
          <button type="submit" form="op.logoutForm" value="yes" name="logout">Yes, sign me out</button>`;
      },
      async postLogoutSuccessSource(ctx) {
        ctx.body = "<!DOCTYPE html><title>Signed out</title><h1>Signed out of the provider</h1>";
      },
    },
  },
});

provider.listen(settings.port, "127.0.0.1", () => {
  console.log(`oidc-provider listening at ${settings.issuer}`);
});
