-- $1 token id or name -> TOKEN or NULL when missing
SELECT rung_token_revoke($1);
