/** The PostgreSQL pool (pg's Pool), present only with DATABASE_URL. */
export const PG_POOL = Symbol('PG_POOL');
