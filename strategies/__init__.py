"""Trading strategies written as callbacks on views (SOBI and others): see the strategies issue."""
