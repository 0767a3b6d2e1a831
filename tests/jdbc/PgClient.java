// pgJDBC (the driver of DBeaver and Metabase) against `gpuledger serve`: the metadata calls those
// tools make, a prepared statement with a timestamp, and a result read with a fetch size.
// Compiled and run by tests/pgwire.rs: java PgClient <jdbc url> <token>.
import java.sql.*;

public class PgClient {
    public static void main(String[] args) throws Exception {
        try (Connection c = DriverManager.getConnection(args[0], "analyst", args[1])) {
            DatabaseMetaData md = c.getMetaData();
            System.out.println("product " + md.getDatabaseProductName() + " " + md.getDatabaseProductVersion());
            try (ResultSet rs = md.getTables(null, null, "gpu_%", new String[]{"TABLE", "VIEW"})) {
                StringBuilder tables = new StringBuilder("tables");
                while (rs.next()) tables.append(' ').append(rs.getString("TABLE_NAME"));
                System.out.println(tables);
            }
            try (ResultSet rs = md.getColumns(null, null, "gpu_hours", "%")) {
                StringBuilder columns = new StringBuilder("columns");
                for (int n = 0; n < 3 && rs.next(); n++) {
                    columns.append(' ').append(rs.getString("COLUMN_NAME")).append(':').append(rs.getString("TYPE_NAME"));
                }
                System.out.println(columns);
            }
            try (ResultSet rs = md.getFunctions(null, null, "generate_series")) {
                int functions = 0;
                while (rs.next()) functions++;
                System.out.println("functions " + (functions > 0));
            }
            try (PreparedStatement ps = c.prepareStatement("select count(*) from gpu_hours where hour >= ? and team = ?")) {
                ps.setTimestamp(1, Timestamp.from(java.time.Instant.parse("2026-11-02T02:00:00Z")));
                ps.setString(2, "vision");
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    System.out.println("prepared " + rs.getLong(1));
                }
            }
            c.setAutoCommit(false);
            try (Statement st = c.createStatement()) {
                st.setFetchSize(2);
                try (ResultSet rs = st.executeQuery("select hour from gpu_hours where team = 'nlp' order by hour")) {
                    int rows = 0;
                    while (rs.next()) rows++;
                    System.out.println("fetched " + rows);
                }
                // The largest fetch size a driver can ask for: read in pieces, all of it.
                st.setFetchSize(Integer.MAX_VALUE);
                try (ResultSet rs = st.executeQuery("select * from generate_series(1, 20000) g")) {
                    long rows = 0, sum = 0;
                    while (rs.next()) { rows++; sum += rs.getLong(1); }
                    System.out.println("fetched all " + rows + " summing " + sum);
                }
            }
        }
    }
}
