// The REST API, with the bearer token of this browser tab (sessionStorage: it goes when the tab
// closes, and other sites cannot read it).

const KEY = 'gpuledger.token';

export const session = {
  token: () => sessionStorage.getItem(KEY),
  start: (token) => sessionStorage.setItem(KEY, token),
  end: () => sessionStorage.removeItem(KEY),
};

/** A failed request: its HTTP status and the problem+json the server sent. */
export class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

/**
 * Calls the API. `body` goes as JSON; the answer comes back as JSON, text, or a Blob (`as: 'blob'`).
 * A 401 ends the session: the token was revoked or never valid.
 */
export async function api(path, { method = 'GET', body, as, token = session.token() } = {}) {
  const headers = { Authorization: `Bearer ${token}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) {
    let problem;
    try {
      problem = await response.json();
    } catch {
      problem = { title: response.statusText, detail: '' };
    }
    if (response.status === 401 && token === session.token()) {
      session.end();
      window.dispatchEvent(new Event('gpuledger:signed-out'));
    }
    throw new ApiError(response.status, problem);
  }
  if (response.status === 204) return null;
  if (as === 'blob') return response.blob();
  const type = response.headers.get('content-type') || '';
  return type.includes('json') ? response.json() : response.text();
}

/** The rows of a read-only query, as objects. */
export const sql = (query) => api('/v1/sql', { method: 'POST', body: { query } });

/** The same query as CSV, for downloading. */
export const sqlCsv = (query) =>
  api('/v1/sql', { method: 'POST', body: { query, format: 'csv' }, as: 'blob' });

/** Who the token is: {scope, team}. */
export const me = (token) => api('/v1/me', { token });

/** How current the ledger is: {built_through, last_build_at, lag_seconds, interval_seconds, …}. */
export const ledgerStatus = () => api('/v1/ledger/status');
