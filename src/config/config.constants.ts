/** Injection token for the frozen AppConfig. */
export const APP_CONFIG = Symbol('APP_CONFIG');
