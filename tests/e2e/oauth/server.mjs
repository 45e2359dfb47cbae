// An OAuth 2.1 authorization server and an MCP resource server that needs its tokens, in one
// Node process, for moniker's end-to-end OAuth tests: moniker as a client
// (tests/e2e/test_oauth.py) and moniker as a resource server (tests/e2e/test_resource_server.py).
//
//   node tests/e2e/oauth/server.mjs
//
// Env:
//   OAUTH_ACCESS_TTL   access-token lifetime, s (default 60)
//   OAUTH_RESOURCES    comma-separated resource URLs the AS issues tokens for besides its own
//   OAUTH_OPAQUE_RESOURCES  of those, the ones whose access tokens are opaque (not JWTs): a
//                      resource server asks the AS about them at its introspection endpoint
//                      (RFC 7662, POST /token/introspection, enabled; a confidential client
//                      such as the client_credentials one may introspect any token)
//                      MCP URL (e.g. moniker's http://127.0.0.1:P/mcp and /mcp/<toolset>): each
//                      gets JWT access tokens (at+jwt) with aud = that URL, scope ⊆ "mcp:tools",
//                      the same TTL. More can be added while running (POST /_test/resources).
//
// Both listen on 127.0.0.1, ephemeral ports. When both are up, ONE JSON line goes to stdout:
//   {"issuer": "http://127.0.0.1:A", "mcp": "http://127.0.0.1:R/mcp",
//    "client_credentials": {"client_id": "...", "client_secret": "..."},
//    "control": "http://127.0.0.1:R/_test",
//    "resources": ["http://127.0.0.1:R/mcp", ...OAUTH_RESOURCES], "kid": "<signing key id>"}
// A request log goes to stderr (method, path, status; never a token or a code). SIGTERM/SIGINT
// end it cleanly.
//
// Authorization server (AS): oidc-provider, issuer http://127.0.0.1:A (no path; plain http is
// fine for oidc-provider, no proxy/dev setting needed).
//   - metadata: /.well-known/oauth-authorization-server and /.well-known/openid-configuration
//     (same document; code_challenge_methods_supported ["S256"],
//     authorization_response_iss_parameter_supported true).
//   - Dynamic Client Registration, open (no initial access token): POST /reg.
//     oidc-provider's defaults for omitted metadata: grant_types ["authorization_code"] (so no
//     refresh token unless "refresh_token" is registered too), token_endpoint_auth_method
//     "client_secret_basic" (a secret is issued; send "none" to register a public client),
//     application_type "web" (redirect_uri matched exactly, port included). With
//     application_type "native" a loopback redirect_uri (http://127.0.0.1:P/callback) matches
//     any port P (RFC 8252 7.3).
//   - PKCE (S256 only) required for every authorization-code request (without one, or with
//     "plain": the redirect carries error=invalid_request).
//   - Resource Indicators (RFC 8707): the resources are the MCP URL below and those of
//     OAUTH_RESOURCES (and POST /_test/resources); a token for one is a JWT (typ at+jwt, RS256,
//     signed with the current signing key, see /_test/rotate) with aud = that URL and
//     scope ⊆ "mcp:tools". A token request without `resource` gets the one granted at /auth
//     (no openid scope here); an /auth request without `resource` gets an opaque token the
//     MCP server rejects.
//   - keys: /jwks holds the published keys, kids "e2e-rs256-<6 hex, per process>-<n>" (so two
//     instances, two issuers, never share a kid); n = 1 at start, +1 at each rotation.
//   - refresh tokens: issued by the code grant to clients registered with the refresh_token
//     grant (offline_access not needed); default rotation (public clients get a new refresh
//     token on each use, and reusing an old one fails).
//   - client_credentials grant: one static confidential client (registered client_secret_basic;
//     oidc-provider accepts client_secret_post from it too). Without `resource` the token is
//     opaque (the MCP server answers 401 invalid_token); without scope=mcp:tools it has no
//     scope (403 insufficient_scope). An unknown resource: error=invalid_target.
//   - token exchange (RFC 8693, grant urn:ietf:params:oauth:grant-type:token-exchange), for
//     the static client (it may use both grants): a subject_token this AS issued for one of
//     its resources (JWT or opaque) -> a JWT for `resource` (one of the resources) with the
//     subject's sub and scope (narrowed by `scope`), client_id the client, and with an
//     actor_token (the client's own client_credentials token) `act: {sub: client id}`.
//     Refused with invalid_grant for an account revoked by /_test/revoke-account.
//   - authorization responses carry `iss` (RFC 9207).
//   - accounts: `alice` (groups ["staff"]) and `bob` (groups ["admins"]). An access token of
//     an interactive login (and its refreshes) carries the account's `groups` claim besides
//     sub = the account; client_credentials tokens have sub = the client id and no `groups`.
//   - login and consent need no human: /interaction/:uid logs in the current login account
//     (`alice` unless POST /_test/login-as chose another), grants whatever is asked, and
//     redirects straight on (303, no form). So a "browser" that
//     only follows redirects (oauth/follow.py) goes
//       GET /auth?... -> 303 /interaction/U (login) -> 303 /auth/U -> 303 /interaction/V
//       (consent) -> 303 /auth/V -> 303 http://127.0.0.1:P/callback?code=...&state=...&iss=...
//     keeping the AS's cookies between hops.
//
// Resource server (RS), http://127.0.0.1:R:
//   - /mcp: MCP Streamable HTTP (official TypeScript SDK, stateless), tools `whoami` (the
//     token's sub and scope, and `act=<actor>` when it has one) and `echo` ({text}); each
//     request it lets in is logged with its token's sub (`RS request by sub=...`). POST only (GET/DELETE: 405).
//     Every request needs `Authorization: Bearer <JWT>`, verified against the AS's JWKS
//     (iss = issuer, aud = the /mcp URL, typ at+jwt; an unknown kid refetches the JWKS, so
//     tokens signed after a rotation pass too). Without one: 401 and
//       WWW-Authenticate: Bearer resource_metadata="http://127.0.0.1:R/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"
//     with a bad or expired one: the same plus error="invalid_token"; with a token lacking
//     mcp:tools: 403 error="insufficient_scope".
//   - /.well-known/oauth-protected-resource/mcp (RFC 9728):
//       {resource, authorization_servers: [issuer], scopes_supported: ["mcp:tools"]}
//   - POST /_test/revoke-seen (for tests): every access token /mcp accepted so far is refused
//     from now on (401 invalid_token), as if revoked before its expiry: a client must then
//     refresh on the 401 rather than before expiry.
//   - POST /_test/hostile (for tests) {resource_metadata?, authorization_server?}: challenges
//     name that metadata URL, the metadata names that authorization server.
//
// Test controls of the AS, served on the RS's origin beside the two above (under "control";
// POST, JSON body, JSON answer; a bad request gets 400 {"error": "..."}):
//   - POST /_test/resources {"resources": [url, ...]}: the AS issues tokens for these too
//     (as OAUTH_RESOURCES) -> {"resources": [every resource]}.
//   - POST /_test/revoke-account {"account": "alice"}: the account's tokens are no longer
//     exchanged (invalid_grant) -> {"revoked": [accounts]}.
//   - POST /_test/exchanges {}: -> {"count": exchanges made, "subjects": {sub: count}}.
//   - POST /_test/login-as {"account": "bob"}: every interactive login from now on logs this
//     account in (sticky until changed; the default is alice) -> {"account": "bob"}.
//     An unknown account: 400.
//   - POST /_test/rotate {"phase": "add"}: a new RS256 key (new kid) is published in the JWKS
//     and signs every token from now on, the old key(s) staying published; {"phase": "drop"}:
//     only the current signing key stays in the JWKS. -> {"kid": signing kid, "published":
//     [kids in the JWKS]}. oidc-provider's keystore is fixed when a Provider is built, so each
//     rotation builds a new Provider object with the new key set and puts it behind the same
//     port; all Providers share one in-memory store (oidc-provider's memory adapter), which
//     keeps registered clients, grants, sessions and refresh tokens, and the access tokens are
//     self-contained JWTs, so everything issued before keeps working (refresh tokens
//     included). The static client_credentials client is the same.
//   - POST /_test/mint {"claims"?: {...}, "header"?: {...}, "key"?: "signing" | "unpublished"}:
//     a JWT access token made here rather than by oidc-provider, for refusal tests ->
//     {"access_token": "..."}. Claims default to {iss: issuer, sub: "mallory", aud: the MCP
//     URL, scope: "mcp:tools", client_id: "e2e-mint", iat: now, exp: now + OAUTH_ACCESS_TTL,
//     jti}; given claims replace them (null removes one, e.g. {"scope": null}). Header:
//     {alg: RS256, typ: "at+jwt", kid: the signing key's kid}, overridable. key "signing" (the
//     default): signed with the AS's current, published key (so e.g. {"iss": "http://other"}
//     is a token that is well signed but from the wrong issuer); "unpublished": signed with a
//     key the AS never published, under the signing key's kid (a bad signature that a
//     verifier cannot tell by its kid).
//
// The flow a client follows (checked by hand with curl and Python, and on every run by
// test_oauth.py::test_harness_with_the_sdk_oauth_client with the Python SDK's OAuth client):
//   1. POST /mcp without a token -> 401 + WWW-Authenticate -> GET resource_metadata
//   2. GET issuer/.well-known/oauth-authorization-server (or openid-configuration)
//   3. POST /reg {redirect_uris:[loopback], grant_types:[authorization_code, refresh_token],
//      token_endpoint_auth_method, application_type: native, ...}
//   4. browser: GET /auth?response_type=code&client_id&redirect_uri&code_challenge(S256)
//      &state&scope=mcp:tools[ offline_access]&resource=<mcp url> ... -> callback?code&state&iss
//   5. POST /token grant_type=authorization_code&code&code_verifier&redirect_uri[&resource]
//      -> {access_token (JWT), refresh_token, expires_in, scope}
//   6. POST /mcp with Bearer -> 200; later POST /token grant_type=refresh_token&refresh_token
//      [&resource] -> new tokens

import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  createRemoteJWKSet, exportJWK, generateKeyPair, jwtVerify, SignJWT,
} from 'jose';
import Provider, { errors } from 'oidc-provider';
// oidc-provider's own in-memory adapter (not re-exported by the package; pinned version), so
// that the Providers built at each key rotation share one store.
import { createMemoryAdapter } from 'oidc-provider/lib/adapters/memory_adapter.js';
import { z } from 'zod';

const HOST = '127.0.0.1';
const ACCESS_TTL = Number.parseInt(process.env.OAUTH_ACCESS_TTL ?? '60', 10);
if (!(ACCESS_TTL > 0)) {
  throw new Error(`OAUTH_ACCESS_TTL must be a positive number of seconds, not ${process.env.OAUTH_ACCESS_TTL}`);
}
const SCOPE = 'mcp:tools';
// The accounts an interactive login can log in, with the claims their access tokens carry.
const ACCOUNTS = {
  alice: { groups: ['staff'] },
  bob: { groups: ['admins'] },
};
let loginAccount = 'alice'; // POST /_test/login-as

function parseResources(list) {
  const out = [];
  for (const item of list) {
    const url = String(item).trim();
    if (!url) continue;
    const parsed = new URL(url); // throws on a non-URL
    if (parsed.hash || !/^https?:$/.test(parsed.protocol)) {
      throw new Error(`not a resource indicator: ${url}`);
    }
    out.push(url);
  }
  return out;
}
const extraResources = new Set(parseResources((process.env.OAUTH_RESOURCES ?? '').split(',')));
const opaqueResources = new Set(parseResources((process.env.OAUTH_OPAQUE_RESOURCES ?? '').split(',')));
for (const url of opaqueResources) extraResources.add(url);

function log(message) {
  process.stderr.write(`[oauth-e2e] ${message}\n`);
}

// Paths only: query strings hold codes and states, which stay out of logs.
function logRequests(name, server) {
  server.on('request', (req, res) => {
    res.on('finish', () => log(`${name} ${req.method} ${req.url.split('?')[0]} -> ${res.statusCode}`));
  });
}

function listen(server) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, HOST, () => resolve(server.address().port));
  });
}

// Both servers listen first, so each knows the other's URL before the provider is built.
let provider;
let rsHandler;
const asServer = http.createServer((req, res) => asHandler(req, res));
// OAUTH_RS_TLS_CERT and OAUTH_RS_TLS_KEY (PEM files): the resource server (its /mcp, metadata
// and test controls) over HTTPS with that certificate; the authorization server stays HTTP.
const RS_TLS = process.env.OAUTH_RS_TLS_CERT
  ? { cert: readFileSync(process.env.OAUTH_RS_TLS_CERT), key: readFileSync(process.env.OAUTH_RS_TLS_KEY) }
  : undefined;
const rsServer = RS_TLS
  ? https.createServer(RS_TLS, (req, res) => rsHandler(req, res))
  : http.createServer((req, res) => rsHandler(req, res));
logRequests('AS', asServer);
logRequests('RS', rsServer);
const asPort = await listen(asServer);
const rsPort = await listen(rsServer);

const ISSUER = `http://${HOST}:${asPort}`;
const RS_ORIGIN = `${RS_TLS ? 'https' : 'http'}://${HOST}:${rsPort}`;
const RESOURCE = `${RS_ORIGIN}/mcp`;
const PRM_URL = `${RS_ORIGIN}/.well-known/oauth-protected-resource/mcp`;

// ------------------------------------------------------------------------------------------
// Authorization server
// ------------------------------------------------------------------------------------------

// Signing keys. `signing` signs every token; `published` is the JWKS (signing first). Each
// process has its own kid prefix, so two instances (two issuers) never share a kid.
const KID_PREFIX = `e2e-rs256-${randomBytes(3).toString('hex')}`;
let keyCount = 0;
async function newKey() {
  keyCount += 1;
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const kid = `${KID_PREFIX}-${keyCount}`;
  return { privateKey, jwk: { ...(await exportJWK(privateKey)), alg: 'RS256', use: 'sig', kid } };
}
let signing = await newKey();
let published = [signing];
const unpublishedKey = (await generateKeyPair('RS256')).privateKey; // for /_test/mint only
const COOKIE_KEYS = [randomBytes(32).toString('base64url')];
const ADAPTER = createMemoryAdapter(); // one in-memory store for every Provider built

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const ccClient = {
  client_id: 'moniker-e2e-cc',
  client_secret: randomBytes(24).toString('base64url'),
  grant_types: ['client_credentials', TOKEN_EXCHANGE],
  response_types: [],
  redirect_uris: [],
  token_endpoint_auth_method: 'client_secret_basic',
  scope: SCOPE,
};

// A Provider with the keys of `published` (oidc-provider reads its keystore once, when built):
// built at start and again on each /_test/rotate. All share ADAPTER's store, so a new Provider
// sees the clients, grants, sessions and refresh tokens of the one before.
function buildProvider() {
  const built = new Provider(ISSUER, {
    adapter: ADAPTER,
    clients: [ccClient],
    jwks: { keys: published.map((key) => key.jwk) },
    cookies: { keys: COOKIE_KEYS },
    findAccount: async (_ctx, id) => ({ accountId: id, claims: async () => ({ sub: id }) }),
    // The account's groups go into its access tokens (JWT claims); client_credentials tokens
    // have no account, so no groups.
    extraTokenClaims: async (_ctx, token) => {
      const account = token.accountId ? ACCOUNTS[token.accountId] : undefined;
      return account ? { groups: account.groups } : undefined;
    },
    scopes: ['openid', 'offline_access', SCOPE],
    pkce: { required: () => true },
    ttl: {
      AccessToken: ACCESS_TTL,
      ClientCredentials: ACCESS_TTL,
    },
    // Refresh tokens for whoever registered the refresh_token grant, offline_access or not.
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: true }, // open: no initial access token
      clientCredentials: { enabled: true },
      revocation: { enabled: true },
      introspection: { enabled: true },
      resourceIndicators: {
        enabled: true,
        // oidc-provider's defaults for defaultResource (none: a client names the resource itself,
        // RFC 8707, as MCP requires) and useGrantedResource (a token request without `resource`
        // gets the granted one since no openid scope is involved).
        getResourceServerInfo: async (_ctx, resourceIndicator) => {
          if (resourceIndicator !== RESOURCE && !extraResources.has(resourceIndicator)) {
            throw new errors.InvalidTarget(`unknown resource ${resourceIndicator}`);
          }
          return {
            scope: SCOPE,
            audience: resourceIndicator,
            accessTokenTTL: ACCESS_TTL,
            ...(opaqueResources.has(resourceIndicator)
              ? { accessTokenFormat: 'opaque' }
              : { accessTokenFormat: 'jwt', jwt: { sign: { alg: 'RS256', kid: signing.jwk.kid } } }),
          };
        },
      },
    },
    // Keep the AS's own error pages short (they land in follow.py's stderr).
    renderError: async (ctx, out) => {
      ctx.type = 'text/plain';
      ctx.body = `oidc-provider error: ${out.error}: ${out.error_description ?? ''}\n`;
    },
  });

  built.registerGrantType(TOKEN_EXCHANGE, tokenExchange.bind(undefined, built), [
    'subject_token', 'subject_token_type', 'actor_token', 'actor_token_type',
    'requested_token_type', 'resource', 'audience', 'scope',
  ]);
  built.on('server_error', (_ctx, err) => log(`AS server_error: ${err.stack ?? err}`));
  for (const event of ['authorization.error', 'grant.error', 'registration_create.error', 'introspection.error']) {
    built.on(event, (_ctx, err) => log(`AS ${event}: ${err.name}: ${err.message} ${err.error_description ?? ''}`));
  }
  built.on('grant.success', (ctx) => log(`AS grant.success ${ctx.oidc.params.grant_type}`));
  built.on('registration_create.success', (_ctx, client) => log(
    `AS registered client: application_type=${client.applicationType} `
    + `token_endpoint_auth_method=${client.tokenEndpointAuthMethod} grant_types=${client.grantTypes} `
    + `redirect_uris=${client.redirectUris}`,
  ));
  return built;
}

// Token exchange (RFC 8693), through oidc-provider's grant type extension point: the client
// (authenticated by oidc-provider at the token endpoint) presents a subject token, an access
// token this AS issued for one of its resources (a JWT checked against its own keys, or an
// opaque one it holds), and gets a JWT access token for `resource` with the subject's `sub`
// and scope (narrowed by `scope`), `client_id` the exchanging client, and with an actor
// token (the client's own client_credentials token, opaque) an `act` claim naming it.
// Refused (invalid_grant) for a subject whose account /_test/revoke-account revoked.
const exchanges = { count: 0, subjects: {} }; // POST /_test/exchanges reads them
const revokedAccounts = new Set();
async function subjectClaims(built, token) {
  if (token.split('.').length === 3) {
    const { payload } = await jwtVerify(token, jwks, { issuer: ISSUER, typ: 'at+jwt', algorithms: ['RS256'] });
    return payload;
  }
  const found = await built.AccessToken.find(token);
  if (!found) throw new Error('unknown opaque token');
  return { sub: found.accountId, scope: found.scope, aud: found.aud, exp: found.exp };
}
async function tokenExchange(built, ctx) {
  const { params, client } = ctx.oidc;
  if (params.subject_token_type !== ACCESS_TOKEN_TYPE) {
    throw new errors.InvalidRequest('subject_token_type must be an access token');
  }
  if (params.requested_token_type && params.requested_token_type !== ACCESS_TOKEN_TYPE) {
    throw new errors.InvalidRequest('only access tokens are issued');
  }
  let subject;
  try {
    subject = await subjectClaims(built, params.subject_token);
  } catch (err) {
    throw new errors.InvalidGrant(`subject_token: ${err.code ?? err.message}`);
  }
  const audiences = [subject.aud].flat();
  if (!audiences.some((aud) => aud === RESOURCE || extraResources.has(aud))) {
    throw new errors.InvalidGrant('the subject token is for no resource of this AS');
  }
  if (revokedAccounts.has(subject.sub)) throw new errors.InvalidGrant('the subject was revoked');
  const resource = params.resource;
  if (!resource || (resource !== RESOURCE && !extraResources.has(resource))) {
    throw new errors.InvalidTarget(`unknown resource ${resource}`);
  }
  const held = new Set(String(subject.scope ?? '').split(' ').filter(Boolean));
  const scope = params.scope
    ? String(params.scope).split(' ').filter((s) => held.has(s)).join(' ')
    : [...held].join(' ');
  let act;
  if (params.actor_token) {
    const actor = await built.ClientCredentials.find(params.actor_token);
    if (!actor || actor.clientId !== client.clientId) throw new errors.InvalidGrant('actor_token is not the client\'s own');
    act = { sub: actor.clientId };
  }
  const now = Math.floor(Date.now() / 1000);
  const payload = {
    iss: ISSUER, sub: subject.sub, aud: resource, scope, client_id: client.clientId,
    iat: now, exp: now + ACCESS_TTL, jti: randomBytes(12).toString('base64url'),
    ...(act ? { act } : {}),
    ...(params.audience ? { moniker_audience: params.audience } : {}),
  };
  const token = await new SignJWT(payload)
    .setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', kid: signing.jwk.kid })
    .sign(signing.privateKey);
  exchanges.count += 1;
  exchanges.subjects[subject.sub] = (exchanges.subjects[subject.sub] ?? 0) + 1;
  log(`AS token-exchange sub=${subject.sub} resource=${resource}${act ? ` act=${act.sub}` : ''}`);
  ctx.body = {
    access_token: token, issued_token_type: ACCESS_TOKEN_TYPE, token_type: 'Bearer',
    expires_in: ACCESS_TTL, scope,
  };
}

let providerCallback;
function installProvider() {
  provider = buildProvider();
  providerCallback = provider.callback();
}
installProvider();

// Login and consent without a human: log the login account in, grant everything asked,
// redirect on.
async function interaction(req, res) {
  const details = await provider.interactionDetails(req, res);
  const { prompt, params, session } = details;
  if (prompt.name === 'login') {
    log(`AS login as ${loginAccount}`);
    await provider.interactionFinished(req, res, { login: { accountId: loginAccount } }, { mergeWithLastSubmission: false });
    return;
  }
  if (prompt.name === 'consent') {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    const missing = prompt.details;
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
    const grantId = await grant.save();
    const consent = details.grantId ? {} : { grantId };
    await provider.interactionFinished(req, res, { consent }, { mergeWithLastSubmission: true });
    return;
  }
  res.writeHead(500, { 'content-type': 'text/plain' }).end(`unexpected prompt ${prompt.name}\n`);
}

function asHandler(req, res) {
  if (req.method === 'GET' && /^\/interaction\/[^/?]+(\?|$)/.test(req.url)) {
    interaction(req, res).catch((err) => {
      log(`AS interaction failed: ${err.name}: ${err.message}`);
      if (!res.headersSent) res.writeHead(400, { 'content-type': 'text/plain' });
      res.end(`interaction failed: ${err.message}\n`);
    });
    return;
  }
  providerCallback(req, res);
}

// ------------------------------------------------------------------------------------------
// Resource server
// ------------------------------------------------------------------------------------------

// A short cooldown: after /_test/rotate a token with the new kid makes it fetch the keys again.
const jwks = createRemoteJWKSet(new URL(`${ISSUER}/jwks`), { cooldownDuration: 500 });
const accepted = new Set(); // jti of every token /mcp accepted
const revoked = new Set(); // jti refused by /_test/revoke-seen

// What a hostile (or hijacked) resource server would say instead, set by POST /_test/hostile:
// {resource_metadata?: URL named in challenges, authorization_server?: URL its PRM names}.
let hostile = {};

function challenge(res, status, error, description) {
  const params = [`resource_metadata="${hostile.resource_metadata ?? PRM_URL}"`, `scope="${SCOPE}"`];
  if (error) params.push(`error="${error}"`);
  if (description) params.push(`error_description="${description.replace(/["\\]/g, '')}"`);
  res.writeHead(status, {
    'www-authenticate': `Bearer ${params.join(', ')}`,
    'content-type': 'application/json',
  });
  res.end(JSON.stringify({ error: error ?? 'unauthorized', error_description: description }));
}

// -> the verified claims, or undefined once a 401/403 was sent.
async function authorize(req, res) {
  const header = req.headers.authorization ?? '';
  const match = /^Bearer[ ]+([^ ]+)$/i.exec(header);
  if (!match) {
    challenge(res, 401, header ? 'invalid_request' : undefined, header ? 'not a Bearer authorization' : undefined);
    return undefined;
  }
  let claims;
  try {
    ({ payload: claims } = await jwtVerify(match[1], jwks, {
      issuer: ISSUER,
      audience: RESOURCE,
      typ: 'at+jwt',
      algorithms: ['RS256'],
    }));
  } catch (err) {
    log(`RS rejected a token: ${err.code ?? err.name}`);
    challenge(res, 401, 'invalid_token', `${err.code ?? err.name}`);
    return undefined;
  }
  if (revoked.has(claims.jti)) {
    log('RS rejected a token: revoked');
    challenge(res, 401, 'invalid_token', 'revoked');
    return undefined;
  }
  const scopes = new Set(String(claims.scope ?? '').split(' '));
  if (!scopes.has(SCOPE)) {
    log(`RS token without ${SCOPE} (scope: ${claims.scope ?? 'none'})`);
    challenge(res, 403, 'insufficient_scope', `${SCOPE} needed`);
    return undefined;
  }
  accepted.add(claims.jti);
  log(`RS request by sub=${claims.sub}${claims.act ? ` act=${claims.act.sub}` : ''}`);
  return claims;
}

function mcpServer(claims) {
  const server = new McpServer({ name: 'moniker-e2e-oauth', version: '1.0.0' });
  server.registerTool(
    'whoami',
    { description: 'Who the access token was issued to: its sub and scope.', inputSchema: {} },
    async () => ({
      content: [{ type: 'text', text: `sub=${claims.sub} scope=${claims.scope ?? ''}${claims.act ? ` act=${claims.act.sub}` : ''}` }],
    }),
  );
  server.registerTool(
    'echo',
    { description: 'Echoes the text back.', inputSchema: { text: z.string() } },
    async ({ text }) => ({ content: [{ type: 'text', text }] }),
  );
  return server;
}

async function mcp(req, res) {
  const claims = await authorize(req, res);
  if (!claims) return;
  if (req.method !== 'POST') {
    res.writeHead(405, { allow: 'POST' }).end();
    return;
  }
  // Stateless: a server and a transport per request.
  const server = mcpServer(claims);
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  res.on('close', () => {
    transport.close().catch(() => {});
    server.close().catch(() => {});
  });
  await server.connect(transport);
  await transport.handleRequest(req, res);
}

rsHandler = (req, res) => {
  const path = req.url.split('?')[0];
  if (path === '/mcp') {
    mcp(req, res).catch((err) => {
      log(`RS /mcp failed: ${err.stack ?? err}`);
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end();
    });
    return;
  }
  if (path === '/_test/revoke-seen' && req.method === 'POST') {
    for (const jti of accepted) revoked.add(jti);
    accepted.clear();
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ revoked: revoked.size }));
    return;
  }
  if (Object.hasOwn(controls, path) && req.method === 'POST') {
    control(path, req, res);
    return;
  }
  if (path === '/_test/hostile' && req.method === 'POST') {
    let body = '';
    req.on('data', (chunk) => { body += chunk; });
    req.on('end', () => {
      hostile = JSON.parse(body || '{}');
      log(`RS turns hostile: ${JSON.stringify(hostile)}`);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
    return;
  }
  if (path === '/.well-known/oauth-protected-resource/mcp' && req.method === 'GET') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({
      resource: RESOURCE,
      authorization_servers: [hostile.authorization_server ?? ISSUER],
      scopes_supported: [SCOPE],
      bearer_methods_supported: ['header'],
    }));
    return;
  }
  res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
};

// ------------------------------------------------------------------------------------------
// Test controls of the authorization server (see the header comment)
// ------------------------------------------------------------------------------------------

class BadRequest extends Error {}

function readJson(req) {
  return new Promise((resolve, reject) => {
    let body = '';
    req.on('data', (chunk) => { body += chunk; });
    req.on('error', reject);
    req.on('end', () => {
      try {
        const value = JSON.parse(body || '{}');
        if (value === null || typeof value !== 'object' || Array.isArray(value)) {
          throw new BadRequest('the body is not a JSON object');
        }
        resolve(value);
      } catch (err) {
        reject(err instanceof BadRequest ? err : new BadRequest(`bad JSON: ${err.message}`));
      }
    });
  });
}

const controls = {
  '/_test/resources': async ({ resources }) => {
    if (!Array.isArray(resources)) throw new BadRequest('resources must be a list of URLs');
    let added;
    try {
      added = parseResources(resources);
    } catch (err) {
      throw new BadRequest(err.message);
    }
    for (const url of added) extraResources.add(url);
    log(`AS resources now: ${[RESOURCE, ...extraResources].join(' ')}`);
    return { resources: [RESOURCE, ...extraResources] };
  },
  '/_test/revoke-account': async ({ account }) => {
    if (typeof account !== 'string' || !account) throw new BadRequest('account is a name');
    revokedAccounts.add(account);
    log(`AS ${account}'s tokens are no longer exchanged`);
    return { revoked: [...revokedAccounts] };
  },
  '/_test/exchanges': async () => exchanges,
  '/_test/login-as': async ({ account }) => {
    if (!Object.hasOwn(ACCOUNTS, account ?? '')) {
      throw new BadRequest(`unknown account ${account}; known: ${Object.keys(ACCOUNTS).join(', ')}`);
    }
    loginAccount = account;
    log(`AS the next logins are ${account}'s`);
    return { account };
  },
  '/_test/rotate': async ({ phase }) => {
    if (phase === 'add') {
      signing = await newKey();
      published = [signing, ...published];
    } else if (phase === 'drop') {
      published = [signing];
    } else {
      throw new BadRequest('phase is "add" or "drop"');
    }
    installProvider();
    const kids = published.map((key) => key.jwk.kid);
    log(`AS rotate ${phase}: signing with ${signing.jwk.kid}, JWKS ${kids.join(' ')}`);
    return { kid: signing.jwk.kid, published: kids };
  },
  '/_test/mint': async ({ claims = {}, header = {}, key = 'signing' }) => {
    if (key !== 'signing' && key !== 'unpublished') throw new BadRequest('key is "signing" or "unpublished"');
    const now = Math.floor(Date.now() / 1000);
    const payload = {
      iss: ISSUER,
      sub: 'mallory',
      aud: RESOURCE,
      scope: SCOPE,
      client_id: 'e2e-mint',
      iat: now,
      exp: now + ACCESS_TTL,
      jti: randomBytes(12).toString('base64url'),
    };
    for (const [name, value] of Object.entries(claims)) {
      if (value === null) delete payload[name];
      else payload[name] = value;
    }
    const protectedHeader = { alg: 'RS256', typ: 'at+jwt', kid: signing.jwk.kid, ...header };
    const signer = key === 'signing' ? signing.privateKey : unpublishedKey;
    const token = await new SignJWT(payload).setProtectedHeader(protectedHeader).sign(signer);
    log(`AS minted a token (key ${key})`);
    return { access_token: token };
  },
};

function control(path, req, res) {
  readJson(req)
    .then((body) => controls[path](body))
    .then((answer) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
    })
    .catch((err) => {
      if (!(err instanceof BadRequest)) log(`RS ${path} failed: ${err.stack ?? err}`);
      const status = err instanceof BadRequest ? 400 : 500;
      if (!res.headersSent) res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: err.message }));
    });
}

// ------------------------------------------------------------------------------------------

function shutdown(signal) {
  log(`${signal}: closing`);
  asServer.closeAllConnections();
  rsServer.closeAllConnections();
  let open = 2;
  const done = () => { open -= 1; if (open === 0) process.exit(0); };
  asServer.close(done);
  rsServer.close(done);
  setTimeout(() => process.exit(0), 2000).unref();
}
process.on('SIGTERM', () => shutdown('SIGTERM'));
process.on('SIGINT', () => shutdown('SIGINT'));

process.stdout.write(`${JSON.stringify({
  issuer: ISSUER,
  mcp: RESOURCE,
  client_credentials: { client_id: ccClient.client_id, client_secret: ccClient.client_secret },
  control: `${RS_ORIGIN}/_test`,
  resources: [RESOURCE, ...extraResources],
  kid: signing.jwk.kid,
})}\n`);
