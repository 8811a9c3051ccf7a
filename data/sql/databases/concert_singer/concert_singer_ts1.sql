CREATE TABLE stadium (stadium_id INTEGER PRIMARY KEY, name TEXT, location TEXT, capacity INTEGER,
        highest INTEGER, lowest INTEGER, average INTEGER);
CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT, song_name TEXT,
        song_release_year INTEGER, age INTEGER, is_male INTEGER);
CREATE TABLE concert (concert_id INTEGER PRIMARY KEY, concert_name TEXT, theme TEXT,
        stadium_id INTEGER REFERENCES stadium(stadium_id), year INTEGER);
CREATE TABLE singer_in_concert (concert_id INTEGER REFERENCES concert(concert_id),
        singer_id INTEGER REFERENCES singer(singer_id), PRIMARY KEY (concert_id, singer_id));
INSERT INTO stadium VALUES (1, 'Peterhead Park', 'Peterhead', 4000, 1096, 857, 976);
INSERT INTO stadium VALUES (2, 'Alloa Athletic Park', 'Alloa Athletic', 4000, 3622, 1278, 2450);
INSERT INTO stadium VALUES (3, 'Ayr United Park', 'Ayr United', 11998, 3851, 1282, 2566);
INSERT INTO stadium VALUES (4, 'Raith Rovers Park', 'Raith Rovers', 10104, 3313, 835, 2074);
INSERT INTO stadium VALUES (5, 'East Fife Park', 'East Fife', 52500, 2650, 452, 1551);
INSERT INTO stadium VALUES (6, 'Stirling Albion Park', 'Stirling Albion', 3100, 2490, 1256, 1873);
INSERT INTO stadium VALUES (7, 'Arbroath Park', 'Arbroath', 52500, 2828, 573, 1700);
INSERT INTO singer VALUES (1, 'Dara Evans', 'Netherlands', 'Fire', 1993, 45, 1);
INSERT INTO singer VALUES (2, 'Omar Garcia', 'United States', 'Moon', 2002, 23, 0);
INSERT INTO singer VALUES (3, 'Ivan Evans', 'France', 'Love', 2005, 38, 1);
INSERT INTO singer VALUES (4, 'Sven Evans', 'Netherlands', 'Fire', 2005, 22, 0);
INSERT INTO singer VALUES (5, 'Eli Moreau', 'Netherlands', 'You', 2000, 38, 0);
INSERT INTO singer VALUES (6, 'Mateo Moreau', 'United States', 'Sun', 2003, 54, 1);
INSERT INTO singer VALUES (7, 'Jun Diaz', 'United States', 'Gentleman', 1994, 33, 0);
INSERT INTO singer VALUES (8, 'Chen Patel', 'Japan', 'Love', 2003, 43, 1);
INSERT INTO singer VALUES (9, 'Jun Adams', 'United States', 'Fire', 2015, 39, 0);
INSERT INTO singer VALUES (10, 'Uma Bauer', 'Japan', 'Hey Oh', 2005, 55, 0);
INSERT INTO concert VALUES (1, 'Auditions 1', 'Happy Tonight', 6, 2014);
INSERT INTO concert VALUES (2, 'Auditions 2', 'Happy Tonight', 6, 2014);
INSERT INTO concert VALUES (3, 'Home Visits 3', 'Bleeding Love', 3, 2014);
INSERT INTO concert VALUES (4, 'Week 4', 'Free choice', 1, 2014);
INSERT INTO concert VALUES (5, 'Super bootcamp 5', 'Party All Night', 2, 2015);
INSERT INTO concert VALUES (6, 'Super bootcamp 6', 'Free choice', 4, 2014);
INSERT INTO concert VALUES (7, 'Super bootcamp 7', 'Wide Awake', 1, 2016);
INSERT INTO concert VALUES (8, 'Week 8', 'Free choice', 5, 2015);
INSERT INTO singer_in_concert VALUES (1, 8);
INSERT INTO singer_in_concert VALUES (2, 1);
INSERT INTO singer_in_concert VALUES (2, 4);
INSERT INTO singer_in_concert VALUES (2, 5);
INSERT INTO singer_in_concert VALUES (2, 9);
INSERT INTO singer_in_concert VALUES (3, 2);
INSERT INTO singer_in_concert VALUES (3, 7);
INSERT INTO singer_in_concert VALUES (4, 2);
INSERT INTO singer_in_concert VALUES (5, 4);
INSERT INTO singer_in_concert VALUES (5, 6);
INSERT INTO singer_in_concert VALUES (6, 5);
INSERT INTO singer_in_concert VALUES (7, 2);
INSERT INTO singer_in_concert VALUES (7, 4);
INSERT INTO singer_in_concert VALUES (7, 8);
INSERT INTO singer_in_concert VALUES (8, 7);
